// The checkpoint manager from a loop of one's own (epochrun/checkpoint_manager.hpp), on the
// test's own 3 MPI ranks and real files: saved and restored bit-identical, asynchronously and
// synchronously, with the node-local level and retention, and a global array restored on
// another rank count. The manager is what the runner saves through, so the commit protocol, the
// judge and the index are the runner's (their own tests); here the entrance is what is tested.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_manager.hpp"
#include "epochrun/errors.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::uint64_t kRows = 48;
constexpr std::uint64_t kColumns = 64;

// What a checkpoint of the loop holds: a global array, a per-node counter, replicated weights.
struct Arrays {
  Arrays()
      : field(job.global_array<double>("field", {kRows, kColumns})),
        steps(job.scalar<std::int64_t>("steps")),
        weights(job.replicated<float>("weights", {16})) {}
  Job job{"own_loop"};
  GlobalArrayHandle<double> field;
  ScalarHandle<std::int64_t> steps;
  BlobHandle<float> weights;
};

// One step of the loop: every value depends on the one before, so a lost or stale value shows.
void step(const Arrays& arrays, Workspace& workspace, std::int64_t epoch, int rank) {
  for (auto& value : arrays.field.of(workspace)) {
    value = value * 0.5 + static_cast<double>(epoch) + 0.125 * rank;
  }
  arrays.steps.of(workspace) += epoch;
  for (auto& weight : arrays.weights.of(workspace)) {
    weight = weight * 0.25f + static_cast<float>(epoch);
  }
}

RunOptions options_in(const std::filesystem::path& directory) {
  RunOptions options;
  options.checkpoint_dir = directory;
  return options;
}

std::vector<std::byte> bytes_of(const Workspace& workspace) {
  std::vector<std::byte> all;
  for (const auto& name : workspace.names()) {
    const auto bytes = workspace.get(name).raw();
    all.insert(all.end(), bytes.begin(), bytes.end());
  }
  return all;
}

// Runs the loop from `first` to `last` with `manager`, from `workspace`.
void run_loop(const Arrays& arrays, CheckpointManager& manager, Workspace& workspace,
              std::int64_t first, std::int64_t last, const Communicator& comm) {
  for (std::int64_t epoch = first; epoch <= last; ++epoch) {
    step(arrays, workspace, epoch, comm.rank());
    const auto saved = manager.save(epoch, workspace, epoch == last);
    ASSERT_FALSE(saved.failure) << *saved.failure;
    ASSERT_EQ(saved.epoch, epoch);
  }
}

// This rank's block of `field` in `workspace` holds what `whole` holds there.
void check_restored(const GlobalArrayHandle<double>& field, const Workspace& workspace,
                    const Communicator& comm, const std::vector<double>& whole) {
  const auto block = field.block(comm.rank(), comm.size());
  const auto mine = field.of(workspace);
  ASSERT_EQ(mine.size(), block.element_count());
  for (std::uint64_t row = 0; row < block.count[0]; ++row) {
    for (std::uint64_t column = 0; column < kColumns; ++column) {
      ASSERT_EQ(mine[row * kColumns + column], whole[(block.start[0] + row) * kColumns + column]);
    }
  }
}

class CheckpointManagerTest : public ::testing::TestWithParam<bool> {};

TEST_P(CheckpointManagerTest, ARestoredLoopEndsBitIdenticalToOneThatWasNotInterrupted) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  Arrays arrays;
  auto options = options_in(scratch / "ck");
  options.async_checkpoint = GetParam();
  Workspace uninterrupted;
  {
    CheckpointManager manager(arrays.job, world, options_in(scratch / "whole"));
    manager.create(uninterrupted);
    EXPECT_FALSE(manager.restore(ResumeRequest::latest(), uninterrupted));
    run_loop(arrays, manager, uninterrupted, 1, 8, world);
  }
  {
    CheckpointManager manager(arrays.job, world, options);
    Workspace workspace;
    manager.create(workspace);
    run_loop(arrays, manager, workspace, 1, 5, world);
    EXPECT_EQ(manager.latest(), 5);
  }
  CheckpointManager manager(arrays.job, world, options);
  Workspace workspace;
  const auto restored = manager.restore(ResumeRequest::latest(), workspace);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->epoch, 5);
  EXPECT_EQ(restored->written_by_ranks, world.size());
  run_loop(arrays, manager, workspace, restored->epoch + 1, 8, world);
  EXPECT_EQ(bytes_of(workspace), bytes_of(uninterrupted));
  // Epoch 0 was never saved; 1 to 8 are committed, each a file the judge accepts.
  EXPECT_EQ(CheckpointDirectory(scratch / "ck").committed_epochs(),
            (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, CheckpointManagerTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Async" : "Sync"; });

TEST(CheckpointManager, AnAsynchronousSaveReturnsBeforeItCommitsAndWaitCommitsIt) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  Arrays arrays;
  auto options = options_in(scratch / "ck");
  options.async_checkpoint = true;
  CheckpointManager manager(arrays.job, world, options);
  Workspace workspace;
  manager.create(workspace);
  step(arrays, workspace, 1, world.rank());
  const auto started = manager.save(1, workspace);
  EXPECT_TRUE(started.in_background);
  EXPECT_FALSE(started.committed);
  const auto waited = manager.wait();
  ASSERT_TRUE(waited);
  EXPECT_TRUE(waited->committed);
  EXPECT_FALSE(manager.wait());
  EXPECT_EQ(manager.latest(), 1);
}

TEST(CheckpointManager, RetentionKeepsTheNewestEpochs) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  Arrays arrays;
  auto options = options_in(scratch / "ck");
  options.retention.keep_last = 2;
  {
    CheckpointManager manager(arrays.job, world, options);
    Workspace workspace;
    manager.create(workspace);
    run_loop(arrays, manager, workspace, 1, 5, world);
  }
  EXPECT_EQ(CheckpointDirectory(scratch / "ck").committed_epochs(),
            (std::vector<std::int64_t>{4, 5}));
}

TEST(CheckpointManager, TheNodeLocalLevelFlushesEveryThirdAndRestoresTheNewestNodeLocalEpoch) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  Arrays arrays;
  auto options = options_in(scratch / "ck");
  options.local_dir = scratch / ("local-" + std::to_string(world.rank()));
  options.flush_every = 3;
  Workspace saved;
  {
    CheckpointManager manager(arrays.job, world, options);
    manager.create(saved);
    for (std::int64_t epoch = 1; epoch <= 5; ++epoch) {
      step(arrays, saved, epoch, world.rank());
      const auto result = manager.save(epoch, saved);
      ASSERT_FALSE(result.failure) << *result.failure;
      // The first is flushed, then the third after it; the others stay node-local.
      EXPECT_EQ(result.node_local, epoch != 1 && epoch != 4) << "epoch " << epoch;
    }
  }
  EXPECT_EQ(CheckpointDirectory(scratch / "ck").committed_epochs(),
            (std::vector<std::int64_t>{1, 4}));
  CheckpointManager manager(arrays.job, world, options);
  Workspace workspace;
  const auto restored = manager.restore(ResumeRequest::latest(), workspace);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->epoch, 5);
  EXPECT_TRUE(restored->node_local);
  EXPECT_EQ(bytes_of(workspace), bytes_of(saved));
}

TEST(CheckpointManager, AGlobalArrayIsRestoredOnAnotherRankCount) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  // A per-node blob needs a rule for another rank count (refused without one, as in a run):
  // this loop's state is the global array and the replicated weights alone.
  struct {
    Job job{"own_loop"};
    GlobalArrayHandle<double> field = job.global_array<double>("field", {kRows, kColumns});
    BlobHandle<float> weights = job.replicated<float>("weights", {16});
  } arrays;
  const auto options = options_in(scratch / "ck");
  std::vector<double> whole(kRows * kColumns);
  {
    CheckpointManager manager(arrays.job, world, options);
    Workspace workspace;
    manager.create(workspace);
    std::iota(arrays.field.of(workspace).begin(), arrays.field.of(workspace).end(),
              1000.0 * world.rank());
    ASSERT_FALSE(manager.save(1, workspace, true).failure);
    // Every rank's block, gathered by hand: the global array as saved.
    const auto block = arrays.field.block(world.rank(), world.size());
    const auto mine = arrays.field.of(workspace);
    std::vector<double> placed(whole.size(), 0.0);
    for (std::uint64_t row = 0; row < block.count[0]; ++row) {
      std::copy_n(mine.begin() + static_cast<std::ptrdiff_t>(row * kColumns), kColumns,
                  placed.begin() + static_cast<std::ptrdiff_t>((block.start[0] + row) * kColumns));
    }
    world.allreduce(std::span(placed), Reduction::kSum);
    whole = placed;
  }
  // Two of the three ranks restore it.
  const auto two = world.split(world.rank() < 2 ? 0 : Communicator::kNoColor);
  if (two) {
    CheckpointManager manager(arrays.job, *two, options);
    Workspace workspace;
    const auto restored = manager.restore(ResumeRequest::latest(), workspace);
    // The ranks of `two` fail alike; the third waits for them at the barrier below either way.
    EXPECT_TRUE(restored);
    if (restored) {
      EXPECT_EQ(restored->written_by_ranks, world.size());
      check_restored(arrays.field, workspace, *two, whole);
    }
  }
  world.barrier();
}

// Options a program set wrongly are refused as the command line refuses them, alike on every
// rank and before anything is written.
TEST(CheckpointManager, OptionsItCannotHonourAreRefusedBeforeAnythingIsWritten) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  Arrays arrays;
  const auto refused = [&](RunOptions options, const std::string& words) {
    try {
      CheckpointManager manager(arrays.job, world, options);
      ADD_FAILURE() << "not refused: " << words;
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
    EXPECT_FALSE(std::filesystem::exists(scratch / "ck"));
  };
  auto options = options_in(scratch / "ck");
  options.flush_every = 3;
  refused(options, "need a node-local directory (local_dir)");
  options = options_in(scratch / "ck");
  options.local_dir = scratch / "ck";
  refused(options, "is the checkpoint directory itself");
  options = options_in(scratch / "ck");
  options.retention.keep_last = 0;
  refused(options, "keep");
  options = options_in(scratch / "ck");
  options.local_dir = scratch / "local";
  options.local_keep = 0;
  refused(options, "local_keep must be a whole number from 1");
  options = options_in(scratch / "ck");
  options.local_dir = scratch / "local";
  options.local_redundancy = "mirror";
  refused(options, "mirror");
  refused(options_in(""), "needs a checkpoint directory");
  world.barrier();
}

}  // namespace
}  // namespace epochrun::testing
