// The typed job API: blobs declared once (Job::blob/scalar/bytes), job options without Boost
// (JobOptions, the registry) and the typed collectives of Communicator, over real MPI ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "epochrun/epoch_limiter.hpp"
#include "epochrun/job_registry.hpp"
#include "epochrun/job_runner.hpp"

namespace epochrun {
namespace {

TEST(TypedCollectives, AllreduceSumMaxMinOverSpansOfEveryNumericType) {
  const auto world = Communicator::world();
  const auto rank = world.rank();
  const auto ranks = world.size();
  std::vector<double> values = {double(rank), -double(rank), 0.5};
  world.allreduce(std::span(values), Reduction::kSum);
  const double rank_sum = double(ranks * (ranks - 1) / 2);
  EXPECT_EQ(values, (std::vector<double>{rank_sum, -rank_sum, 0.5 * ranks}));

  std::int32_t small[] = {rank, -rank};
  world.allreduce(std::span(small), Reduction::kMax);
  EXPECT_EQ(small[0], ranks - 1);
  EXPECT_EQ(small[1], 0);
  EXPECT_EQ(world.allreduce(std::int64_t{rank + 10}, Reduction::kMin), 10);
  EXPECT_EQ(world.allreduce(float(rank), Reduction::kMax), float(ranks - 1));
  EXPECT_EQ(world.allreduce(std::uint8_t(1), Reduction::kSum), std::uint8_t(ranks));
}

TEST(TypedCollectives, BroadcastGatherAndAllgatherKeepEachRanksElements) {
  const auto world = Communicator::world();
  const auto rank = world.rank();
  std::vector<std::int64_t> values(4, rank == 1 ? 7 : -1);
  world.broadcast(std::span(values), 1);
  EXPECT_EQ(values, std::vector<std::int64_t>(4, 7));
  double scalar = rank == 0 ? 2.5 : 0.0;
  world.broadcast(scalar);
  EXPECT_EQ(scalar, 2.5);

  // Rank r contributes r + 1 elements of value r: the sizes may differ.
  const std::vector<double> mine(std::size_t(rank) + 1, double(rank));
  const auto gathered = world.gather(std::span(mine));
  const auto everywhere = world.allgather(std::span(mine));
  ASSERT_EQ(everywhere.size(), std::size_t(world.size()));
  for (int source = 0; source < world.size(); ++source) {
    EXPECT_EQ(everywhere[std::size_t(source)],
              std::vector<double>(std::size_t(source) + 1, double(source)));
  }
  EXPECT_EQ(gathered, world.is_root() ? everywhere : std::vector<std::vector<double>>{});
}

TEST(TypedCollectives, ScatterGivesEachRankItsOwnPart) {
  const auto world = Communicator::world();
  // Rank r's part: r bytes of value r (rank 0's is empty).
  std::vector<std::vector<std::byte>> parts;
  if (world.is_root()) {
    for (int rank = 0; rank < world.size(); ++rank) {
      parts.emplace_back(std::size_t(rank), std::byte(rank));
    }
  }
  EXPECT_EQ(world.scatter(parts),
            std::vector<std::byte>(std::size_t(world.rank()), std::byte(world.rank())));
}

TEST(TypedCollectives, SendrecvAlongAChainSkipsTheMissingNeighbours) {
  const auto world = Communicator::world();
  const int rank = world.rank();
  const int up = rank > 0 ? rank - 1 : Communicator::kNoRank;
  const int down = rank + 1 < world.size() ? rank + 1 : Communicator::kNoRank;
  const std::vector<float> row(3, float(rank));
  std::vector<float> from_below(3, -1.0f);
  world.sendrecv(std::span(row), up, std::span(from_below), down);
  const float expected = down == Communicator::kNoRank ? -1.0f : float(down);
  EXPECT_EQ(from_below, std::vector<float>(3, expected));
}

// The first ranks as a part of their own, ranked in reverse by their key; the last rank joins
// no part and gets none. The part's collectives reach its ranks only.
TEST(TypedCollectives, SplitMakesAPartOfTheRanksWithItsOwnCollectives) {
  const auto world = Communicator::world();
  const int members = std::max(1, world.size() - 1);
  const bool member = world.rank() < members;
  const auto part =
      world.split(member ? 0 : Communicator::kNoColor, member ? members - world.rank() : 0);
  ASSERT_EQ(part.has_value(), member);
  if (part) {
    EXPECT_EQ(part->size(), members);
    EXPECT_EQ(part->rank(), members - 1 - world.rank());
    EXPECT_EQ(part->allreduce(std::int64_t{1}, Reduction::kSum), members);
  }
  // Two parts by parity, each counting its own ranks.
  const auto parity = world.split(world.rank() % 2);
  ASSERT_TRUE(parity.has_value());
  EXPECT_EQ(parity->allreduce(std::int64_t{1}, Reduction::kSum),
            (world.size() + 1 - world.rank() % 2) / 2);
}

TEST(BlobDeclarations, CreateTypedBlobsBeforeTheJobsInitTasksAndListThemForResume) {
  const auto world = Communicator::world();
  Job job("declared");
  // A task added before the declarations still finds them: they are created first.
  std::vector<double> seen_at_init;
  job.init_group.add("read_declared", [&](TaskContext& context) {
    auto weights = context.workspace.get("weights").as<double>();
    seen_at_init.assign(weights.begin(), weights.end());
  });
  const auto weights = job.blob<double>("weights", {2, 3}, {.output = true});
  const auto step = job.scalar<std::int64_t>("step", 5);
  const auto state = job.bytes("state", 16);
  add_epoch_limiter(job, 2);
  job.epoch_group.add("train", [=](TaskContext& context) {
    std::ranges::fill(weights.of(context), double(context.epoch));
    step.of(context) += 1;
    state.of(context)[0] = std::byte{42};
  });

  EXPECT_EQ(job.outputs(), std::vector<std::string>{"weights"});
  // The epoch limiter declares its counter too (replicated).
  ASSERT_EQ(job.expected_blobs().size(), 4u);
  EXPECT_EQ(job.expected_blobs()[0].name, "weights");
  EXPECT_EQ(job.expected_blobs()[0].dtype, DType::kF64);
  EXPECT_EQ(job.expected_blobs()[0].shape, (Shape{2, 3}));
  EXPECT_EQ(job.expected_blobs()[1].shape, Shape{});
  EXPECT_EQ(job.expected_blobs()[2].dtype, DType::kBytes);
  EXPECT_EQ(job.expected_blobs()[2].shape, Shape{16});

  Workspace workspace;
  const auto summary = JobRunner(std::move(job), world, RunOptions{}).run(workspace);
  EXPECT_EQ(seen_at_init, std::vector<double>(6, 0.0));
  EXPECT_EQ(std::vector<double>(weights.of(workspace).begin(), weights.of(workspace).end()),
            std::vector<double>(6, 2.0));
  EXPECT_EQ(step.of(std::as_const(workspace)), 7);
  EXPECT_EQ(state.of(workspace)[0], std::byte{42});
  EXPECT_EQ(workspace.get("state").dtype(), DType::kBytes);
  if (world.is_root()) {
    EXPECT_EQ(summary.outputs.size(), std::size_t(world.size()));
  }
}

TEST(BlobDeclarations, RefuseARepeatedNameAndAnUndeclaredGather) {
  Job job("refusals");
  const auto first = job.scalar<double>("loss");
  EXPECT_THROW(job.blob<float>("loss", {3}), UsageError);
  EXPECT_EQ(job.expected_blobs().size(), 1u);

  const GatheredBlobs gathered = {{"trainer_0", {{"other", Blob::scalar(1.0)}}}};
  try {
    first.gathered_from(gathered);
    FAIL() << "an undeclared output was gathered";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("'loss'"), std::string::npos) << error.what();
  }
}

// A global array's blocks must tile it: a rule that leaves a gap is refused before the first
// epoch, on every rank, naming the array and the ranks; the default rule gives each rank its
// block of a 2-D process grid, created zero-filled by init.
TEST(BlobDeclarations, AGlobalArrayWhoseBlocksLeaveAGapIsRefusedNamingTheRanks) {
  const auto world = Communicator::world();
  Job gap("gap");
  gap.global_array<double>("field", {6, 4}, [](const Shape& shape, int rank, int ranks) {
    auto block = balanced_block(shape, ranks, rank);
    if (rank == ranks - 1 && block.count[0] > 0) {
      block.count[0] -= 1;  // the last rank's last row is nobody's
    }
    return block;
  });
  Workspace workspace;
  try {
    JobRunner(std::move(gap), world, RunOptions{}).run(workspace);
    FAIL() << "ran with a gap in the global array";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("global array 'field'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank"), std::string::npos) << message;
  }
  EXPECT_EQ(workspace.size(), 0u) << "init ran";

  Job grid("grid");
  const auto field = grid.global_array<double>("field", {6, 4});
  add_epoch_limiter(grid, 1);
  Workspace mine;
  JobRunner(std::move(grid), world, RunOptions{}).run(mine);
  const auto block = field.block(world.rank(), world.size());
  EXPECT_EQ(block, balanced_block({6, 4}, world.size(), world.rank()));
  EXPECT_EQ(mine.get("field").shape(), block.count);
  EXPECT_EQ(field.of(mine).size(), block.element_count());
}

struct CounterOptions {
  std::int64_t count = 3;
  double rate = 0.5;
  std::string label = "x";
  bool verbose = false;
};

TEST(JobOptions, BindVariablesWithTheirDefaultsAndBuildThroughTheRegistry) {
  register_job("typed_options_job", "a job of this test",
               with_options<CounterOptions>(
                   [](JobOptions& options, CounterOptions& values) {
                     options.add("count", &values.count, "how many");
                     options.add("rate", &values.rate, "how fast");
                     options.add("label", &values.label, "what");
                     options.add("verbose", &values.verbose, "say more");
                   },
                   [](const CounterOptions& values) {
                     Job job("typed_options_job");
                     job.blob<double>("values", {std::uint64_t(values.count)});
                     return job;
                   }));
  const auto* registration = JobRegistry::instance().find("typed_options_job");
  ASSERT_NE(registration, nullptr);
  JobOptions options;
  const auto make_job = registration->declare(options);
  ASSERT_EQ(options.all().size(), 4u);
  EXPECT_EQ(options.all()[0].key, "count");
  EXPECT_EQ(options.all()[2].help, "what");
  // What the program's parser does: write the parsed value through the bound variable.
  auto* count = std::get<std::int64_t*>(options.all()[0].target);
  EXPECT_EQ(*count, 3);
  *count = 9;
  EXPECT_EQ(make_job().expected_blobs().at(0).shape, Shape{9});

  EXPECT_THROW(options.add("count", count, "again"), UsageError);
  EXPECT_THROW(options.add("bad/key", count, ""), UsageError);
}

}  // namespace
}  // namespace epochrun
