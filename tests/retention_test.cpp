// --keep-last, --keep-every and --delete-checkpoints-on-success: nothing is deleted before a
// newer checkpoint is committed, and the newest one never is.
#include <gtest/gtest.h>

#include "checkpoint_directory_admin.hpp"
#include "directory_lock.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/retention.hpp"
#include "nlohmann/json.hpp"
#include "run_history_file.hpp"
#include "run_metrics.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

using Epochs = std::vector<std::int64_t>;

TEST(RetentionPolicy, ChoosesWhatToDelete) {
  RetentionPolicy keep_all;
  EXPECT_EQ(keep_all.epochs_to_delete({0, 1, 2, 3}, 3), Epochs{});
  RetentionPolicy last_two{2, std::nullopt};
  EXPECT_EQ(last_two.epochs_to_delete({0, 1, 2, 3}, 3), (Epochs{0, 1}));
  RetentionPolicy snapshots{std::nullopt, 2};  // every 2nd epoch plus the newest
  EXPECT_EQ(snapshots.epochs_to_delete({0, 1, 2, 3}, 3), (Epochs{1}));
  RetentionPolicy both{2, 3};
  EXPECT_EQ(both.epochs_to_delete({0, 1, 2, 3, 4, 5, 6, 7}, 7), (Epochs{1, 2, 4, 5}));
  // Epochs after the one just committed belong to an older run and are left to be replaced.
  EXPECT_EQ(last_two.epochs_to_delete({0, 1, 2, 3, 4, 5}, 2), (Epochs{0}));
  RetentionPolicy last_one{1, std::nullopt};
  EXPECT_EQ(last_one.epochs_to_delete({5}, 5), Epochs{});
  EXPECT_THROW(validate(RetentionPolicy{0, std::nullopt}), UsageError);
  EXPECT_THROW(validate(RetentionPolicy{std::nullopt, -1}), UsageError);
}

TEST(Retention, KeepLastKeepsTheNewestAndKeepEveryTheSnapshots) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  auto last_two = options_for(scratch / "last_two");
  last_two.retention.keep_last = 2;
  Workspace a;
  auto summary = run_sum_pipeline(world, last_two, a);
  EXPECT_EQ(summary.committed, (Epochs{0, 1, 2, 3, 4}));
  EXPECT_EQ(summary.deleted, (Epochs{0, 1, 2}));
  EXPECT_EQ(CheckpointDirectory(scratch / "last_two").committed_epochs(), (Epochs{3, 4}));

  auto snapshots = options_for(scratch / "snapshots");
  snapshots.retention.keep_every = 2;
  Workspace b;
  run_sum_pipeline(world, snapshots, b);
  EXPECT_EQ(CheckpointDirectory(scratch / "snapshots").committed_epochs(), (Epochs{0, 2, 4}));
  // The index follows the deletions.
  world.barrier();
  auto index = nlohmann::json::parse(read_file(scratch / "snapshots" / kIndexFileName));
  EXPECT_EQ(index["checkpoints"].size(), 3u);
  EXPECT_EQ(index["latest"], 4);
}

TEST(Retention, AResumedRunLeavesLaterEpochsUntilItReplacesThem) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);
  auto options = options_for(directory.path(), ResumeRequest::at(1));
  options.retention.keep_last = 2;
  options.num_epochs = 2;
  Workspace resumed;
  auto summary = run_sum_pipeline(world, options, resumed);
  EXPECT_EQ(summary.committed, Epochs{2});
  // 0 went once 2 was committed; 1 and 2 are the two newest of this run; 3 and 4 were not
  // reached by it and stay.
  EXPECT_EQ(CheckpointDirectory(directory.path()).committed_epochs(), (Epochs{1, 2, 3, 4}));
}

TEST(Retention, NothingIsDeletedWhenTheSaveFails) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);
  // Resume from 2 keeping only 1 checkpoint, with every save failing: a deletion may only
  // follow a commit, so epochs 0..4 must all survive.
  auto options = options_for(directory.path(), ResumeRequest::at(2));
  options.retention.keep_last = 1;
  Workspace second;
  RunSummary summary;
  {
    FileSizeLimit limit(1024);
    summary = run_sum_pipeline(world, options, second);
  }
  EXPECT_EQ(summary.failed_saves.size(), 2u);
  EXPECT_TRUE(summary.deleted.empty());
  EXPECT_EQ(CheckpointDirectory(directory.path()).committed_epochs(), (Epochs{0, 1, 2, 3, 4}));
}

TEST(Retention, DeleteOnSuccessRemovesTheCheckpointsOnlyAfterTheExitGroup) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  auto options = options_for(scratch / "ok");
  options.delete_checkpoints_on_success = true;
  Workspace a;
  auto summary = run_sum_pipeline(world, options, a);
  EXPECT_EQ(summary.deleted, (Epochs{0, 1, 2, 3, 4}));
  world.barrier();
  // The checkpoints go; the run history and the metrics stay.
  EXPECT_EQ(list_directory(scratch / "ok"),
            (std::vector<std::string>{kLockFileName, kMetricsFileName, kRunHistoryFileName}));

  auto failing_job = jobs::make_sum_pipeline();
  std::int64_t committed_when_exit_ran = -1;
  failing_job.exit_group.add("fails", [&](TaskContext&) {
    committed_when_exit_ran = static_cast<std::int64_t>(
        CheckpointDirectory(scratch / "failing").committed_epochs().size());
    throw std::runtime_error("export failed");
  });
  auto failing = options_for(scratch / "failing");
  failing.delete_checkpoints_on_success = true;
  Workspace b;
  EXPECT_THROW(JobRunner(std::move(failing_job), world, failing).run(b), Error);
  EXPECT_EQ(committed_when_exit_ran, 5);
  EXPECT_EQ(CheckpointDirectory(scratch / "failing").committed_epochs(), (Epochs{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace epochrun::testing
