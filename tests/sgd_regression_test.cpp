// sgd_regression: a real data-parallel training job. A run resumed from a middle epoch must end
// bit-identical to an uninterrupted one; the same run on one rank ends within the job's stated
// tolerance of the run on all of them (the data is the same, the gradient's sums are split
// differently).
#include <gtest/gtest.h>

#include <cmath>

#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "sgd_regression.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

jobs::SgdRegressionOptions small_problem(const std::filesystem::path& model_file) {
  jobs::SgdRegressionOptions options;
  options.features = 8;
  options.samples = 3000;
  options.batches_per_epoch = 16;
  options.max_epochs = 10;
  options.loss_threshold = 0;  // run every epoch: the comparison covers all of them
  options.model_file = model_file.string();
  return options;
}

RunSummary train(const Communicator& comm, const jobs::SgdRegressionOptions& job_options,
                 const std::filesystem::path& directory, ResumeRequest resume, Workspace& workspace,
                 std::optional<std::int64_t> num_epochs = std::nullopt) {
  RunOptions options;
  options.checkpoint_dir = directory;
  options.resume = resume;
  options.num_epochs = num_epochs;
  return JobRunner(jobs::make_sgd_regression(job_options), comm, options).run(workspace);
}

// The blobs of one committed epoch, read back from the file: every node's per-node blobs (none:
// the job's state is all replicated) and, under "replicated", the replicated ones.
std::map<std::string, std::map<std::string, Blob>> checkpoint_contents(
    const std::filesystem::path& directory, std::int64_t epoch) {
  CheckpointReader reader(CheckpointDirectory(directory).file_for(epoch));
  std::map<std::string, std::map<std::string, Blob>> contents;
  for (const auto& [node, records] : reader.header().blobs) {
    for (const auto& record : records) {
      contents[node][record.name] = reader.read_blob(node, record.name);
    }
  }
  for (const auto& record : reader.header().replicated) {
    contents["replicated"][record.name] = reader.read_replicated(record.name);
  }
  return contents;
}

TEST(SgdRegression, ResumedRunsEndBitIdenticalToAnUninterruptedRun) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto options = small_problem(scratch / "model_a.h5");

  Workspace uninterrupted;
  auto full = train(world, options, scratch / "a", ResumeRequest::from_scratch(), uninterrupted);
  ASSERT_EQ(full.last_epoch, 10);
  const auto final_checkpoint = checkpoint_contents(scratch / "a", 10);
  ASSERT_EQ(final_checkpoint.at("replicated").size(), 6u);  // the job's five and the epoch limit

  // Interrupted after epoch 4 (as a preempted job would be), then resumed from the latest.
  auto interrupted_options = options;
  interrupted_options.model_file = (scratch / "model_b.h5").string();
  Workspace before_preemption;
  auto first_half = train(world, interrupted_options, scratch / "b", ResumeRequest::from_scratch(),
                          before_preemption, 4);
  ASSERT_EQ(first_half.last_epoch, 4);
  Workspace after_restart;
  auto second_half =
      train(world, interrupted_options, scratch / "b", ResumeRequest::latest(), after_restart);
  EXPECT_EQ(second_half.resumed_from, 4);
  EXPECT_EQ(second_half.last_epoch, 10);
  EXPECT_EQ(after_restart.blobs(), uninterrupted.blobs()) << "in-memory state differs";
  EXPECT_EQ(checkpoint_contents(scratch / "b", 10), final_checkpoint);
  if (world.is_root()) {
    EXPECT_EQ(read_blob_file(scratch / "model_b.h5"), read_blob_file(scratch / "model_a.h5"));
  }

  // Resumed explicitly from a middle epoch of the first run's own directory: the later epochs
  // are replaced as they are recommitted, and end the same.
  Workspace from_middle;
  auto middle = train(world, options, scratch / "a", ResumeRequest::at(6), from_middle);
  EXPECT_EQ(middle.committed, (std::vector<std::int64_t>{7, 8, 9, 10}));
  EXPECT_EQ(from_middle.blobs(), uninterrupted.blobs());
  EXPECT_EQ(checkpoint_contents(scratch / "a", 10), final_checkpoint);
}

TEST(SgdRegression, TrainsAndKeepsReplicasIdentical) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  auto options = small_problem(scratch / "model.h5");
  Workspace workspace;
  auto summary = train(world, options, scratch / "ck", ResumeRequest::from_scratch(), workspace);
  EXPECT_EQ(summary.last_epoch, options.max_epochs);
  const double loss = workspace.get(jobs::kSgdLoss).item<double>();
  EXPECT_LT(loss, 10 * options.noise * options.noise) << "did not converge";
  EXPECT_GT(loss, 0.5 * options.noise * options.noise) << "better than the noise allows";
  // Every blob is replicated: the same bytes on every rank.
  for (const auto& name : workspace.names()) {
    const auto bytes = workspace.get(name).raw();
    for (const auto& other : world.allgather(std::span<const std::byte>(bytes))) {
      EXPECT_TRUE(std::ranges::equal(other, bytes)) << name;
    }
  }
  if (world.is_root()) {
    auto model = read_blob_file(scratch / "model.h5");
    EXPECT_EQ(model.at(jobs::kSgdWeights), workspace.get(jobs::kSgdWeights));
    EXPECT_EQ(model.at(jobs::kSgdBias), workspace.get(jobs::kSgdBias));
  }
  // The optimizer state is checkpointed once, replicated, as opaque bytes (H5T_OPAQUE).
  CheckpointReader reader(CheckpointDirectory(scratch / "ck").file_for(3));
  EXPECT_TRUE(reader.header().blobs.at("trainer_0").empty());
  const auto& records = reader.header().replicated;
  auto state = std::find_if(records.begin(), records.end(),
                            [](const BlobRecord& r) { return r.name == jobs::kSgdOptimizerState; });
  ASSERT_NE(state, records.end());
  EXPECT_EQ(state->dtype, DType::kBytes);
}

// The same problem on one rank: the same samples and batches, only the gradient's sums split
// otherwise, so the parameters and the loss agree within kSgdRankChangeTolerance (relative),
// not necessarily bit for bit.
TEST(SgdRegression, OneRankEndsWithinTheToleranceOfAllRanks) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  auto options = small_problem("");
  Workspace parallel;
  train(world, options, "", ResumeRequest::from_scratch(), parallel);
  if (world.is_root()) {
    Workspace serial;
    train(Communicator::self(), options, "", ResumeRequest::from_scratch(), serial);
    auto near = [](double a, double b) {
      return std::abs(a - b) <= jobs::kSgdRankChangeTolerance * std::max(std::abs(a), std::abs(b));
    };
    const auto weights = parallel.get(jobs::kSgdWeights).as<double>();
    const auto serial_weights = serial.get(jobs::kSgdWeights).as<double>();
    ASSERT_EQ(weights.size(), serial_weights.size());
    for (std::size_t j = 0; j < weights.size(); ++j) {
      EXPECT_PRED2(near, weights[j], serial_weights[j]) << "weight " << j;
    }
    for (const auto* name : {jobs::kSgdBias, jobs::kSgdLoss}) {
      EXPECT_PRED2(near, parallel.get(name).item<double>(), serial.get(name).item<double>())
          << name;
    }
    // The data cursor is a global sample index: the same at any rank count.
    EXPECT_EQ(parallel.get(jobs::kSgdDataCursor), serial.get(jobs::kSgdDataCursor));
  }
  world.barrier();
}

TEST(SgdRegression, StopsWhenTheLossFallsUnderTheThreshold) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  jobs::SgdRegressionOptions options;  // the built-in defaults
  options.model_file = "";
  Workspace workspace;
  auto summary = train(world, options, scratch / "ck", ResumeRequest::from_scratch(), workspace);
  EXPECT_LT(summary.last_epoch, options.max_epochs);
  EXPECT_NE(summary.stop_reason.find("loss_below_threshold"), std::string::npos)
      << summary.stop_reason;
  EXPECT_LT(workspace.get(jobs::kSgdLoss).item<double>(), options.loss_threshold);
}

TEST(SgdRegression, OutOfRangeOptionsAreUsageErrors) {
  auto with = [](auto change) {
    jobs::SgdRegressionOptions options;
    change(options);
    return options;
  };
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.learning_rate = -1; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.learning_rate = NAN; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.momentum = 1.0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.features = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.samples = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.samples = 100'000'000'000; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.max_epochs = 0; })), UsageError);
  EXPECT_NO_THROW(jobs::validate(jobs::SgdRegressionOptions{}));
}

}  // namespace
}  // namespace epochrun::testing
