// The reference's test_ckpt_save_failure and more: a checkpoint that cannot be written never
// stops the job, never touches a committed checkpoint and leaves no temporary file behind.
#include <gtest/gtest.h>
#include <algorithm>
#include <fstream>

#include "checkpoint_directory_admin.hpp"
#include "directory_lock.hpp"
#include "epochrun/epoch_limiter.hpp"
#include "nlohmann/json.hpp"
#include "run_history_file.hpp"
#include "run_metrics.hpp"
#include "sum_pipeline_fixture.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

void expect_all_saves_failed_but_job_finished(const RunSummary& summary,
                                              const Workspace& workspace) {
  EXPECT_EQ(summary.last_epoch, 4);
  EXPECT_EQ(total_of(workspace), 145);
  EXPECT_TRUE(summary.committed.empty());
  ASSERT_EQ(summary.failed_saves.size(), 5u);
  for (std::int64_t epoch = 0; epoch <= 4; ++epoch) {
    const auto& failure = summary.failed_saves[static_cast<std::size_t>(epoch)];
    EXPECT_EQ(failure.epoch, epoch);
    EXPECT_NE(failure.error.find("save epoch " + std::to_string(epoch)), std::string::npos)
        << failure.error;
  }
}

// The reference's contract, without the directory lock: a run that cannot take it is refused
// (RunOptions::directory_lock), so these run unlocked to reach their saves.
RunOptions unlocked(RunOptions options) {
  options.directory_lock = false;
  return options;
}

TEST(SaveFailure, ADirectoryThatCannotBeCreatedDoesNotStopTheJob) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto blocker = scratch / "a_file";
  if (world.is_root()) {
    std::ofstream(blocker) << "not a directory";
  }
  world.barrier();
  Workspace workspace;
  auto summary = run_sum_pipeline(world, unlocked(options_for(blocker / "checkpoints")), workspace);
  expect_all_saves_failed_but_job_finished(summary, workspace);
  EXPECT_NE(summary.failed_saves[0].error.find("create directory"), std::string::npos)
      << summary.failed_saves[0].error;
}

TEST(SaveFailure, AnUnwritableDirectoryDoesNotStopTheJob) {
  // /proc exists and refuses new files even to root, where chmod would not.
  const auto world = Communicator::world();
  Workspace workspace;
  auto summary = run_sum_pipeline(world, unlocked(options_for("/proc")), workspace);
  expect_all_saves_failed_but_job_finished(summary, workspace);
}

TEST(SaveFailure, AFileSizeLimitFailsTheSaveAndLeavesCommittedCheckpointsIntact) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  Workspace first;
  run_sum_pipeline(world, options_for(directory.path()), first);
  std::vector<std::string> committed_bytes;
  for (std::int64_t epoch = 0; epoch <= 4; ++epoch) {
    committed_bytes.push_back(read_file(CheckpointDirectory(directory.path()).file_for(epoch)));
  }
  const auto files_before = list_directory(directory.path());

  // Resume from epoch 2 with writes capped far below a checkpoint's size: the saves of
  // epochs 3 and 4 must fail, and would replace committed files if they completed.
  RunSummary summary;
  Workspace resumed;
  {
    FileSizeLimit limit(2048);
    summary = run_sum_pipeline(world, options_for(directory.path(), ResumeRequest::at(2)), resumed);
  }
  EXPECT_EQ(total_of(resumed), 145);
  EXPECT_TRUE(summary.committed.empty());
  ASSERT_EQ(summary.failed_saves.size(), 2u);
  EXPECT_EQ(summary.failed_saves[0].epoch, 3);
  EXPECT_EQ(summary.failed_saves[1].epoch, 4);
  EXPECT_NE(summary.failed_saves[0].error.find("file size limit"), std::string::npos)
      << summary.failed_saves[0].error;

  world.barrier();
  EXPECT_EQ(list_directory(directory.path()), files_before);  // no temporary file left
  for (std::int64_t epoch = 0; epoch <= 4; ++epoch) {
    EXPECT_EQ(read_file(CheckpointDirectory(directory.path()).file_for(epoch)),
              committed_bytes[static_cast<std::size_t>(epoch)])
        << "committed epoch " << epoch << " was changed";
  }
  // And the untouched epoch 4 still loads as the first run left it.
  Workspace loaded;
  load_checkpoint(CheckpointDirectory(directory.path()), world, sum_pipeline_expectation(world, 4),
                  loaded);
  EXPECT_EQ(total_of(loaded), 145);
}

// A TmpfsMount made by rank 0 in a shared directory; construction and destruction are
// collective.
class SmallFileSystem {
 public:
  SmallFileSystem(const Communicator& comm, const std::filesystem::path& where,
                  const std::string& size)
      : comm_(comm) {
    std::int64_t ok = 1;
    if (comm.is_root()) {
      mount_.emplace(where, size);
      ok = mount_->mounted();
    }
    comm.broadcast(ok);
    mounted_ = ok != 0;
  }
  ~SmallFileSystem() {
    comm_.barrier();  // every rank is done with it before it goes
  }
  bool mounted() const { return mounted_; }

 private:
  Communicator comm_;
  std::optional<TmpfsMount> mount_;
  bool mounted_ = false;
};

TEST(SaveFailure, AFullDiskFailsLaterSavesButTheJobGoesOnAndEarlierOnesStayValid) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto disk = scratch / "small_disk";
  SmallFileSystem file_system(world, disk, "64k");
  if (!file_system.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  Workspace workspace;
  auto summary = run_sum_pipeline(world, options_for(disk / "checkpoints"), workspace);
  EXPECT_EQ(summary.last_epoch, 4);
  EXPECT_EQ(total_of(workspace), 145);
  ASSERT_FALSE(summary.committed.empty()) << "the disk should hold the first checkpoints";
  ASSERT_FALSE(summary.failed_saves.empty()) << "64 KiB cannot hold five checkpoints";
  EXPECT_EQ(summary.committed.size() + summary.failed_saves.size(), 5u);
  for (const auto& failure : summary.failed_saves) {
    EXPECT_GT(failure.epoch, summary.committed.back());
    EXPECT_NE(failure.error.find("not enough space"), std::string::npos) << failure.error;
  }
  world.barrier();
  // Only committed checkpoints (and the index) are on the disk, and each one loads.
  std::vector<std::string> expected_files = {kLockFileName};
  for (auto epoch : summary.committed) {
    expected_files.push_back(checkpoint_file_name(epoch));
  }
  expected_files.push_back(kIndexFileName);
  // The run's record and metrics fit into the space the failed saves gave back, or they are
  // not there at all.
  for (const char* record : {kMetricsFileName, kRunHistoryFileName}) {
    if (std::filesystem::exists(disk / "checkpoints" / record)) {
      expected_files.push_back(record);
    }
  }
  EXPECT_EQ(list_directory(disk / "checkpoints"), expected_files);
  for (auto epoch : summary.committed) {
    if (epoch == 0) {
      continue;
    }
    Workspace loaded;
    load_checkpoint(CheckpointDirectory(disk / "checkpoints"), world,
                    sum_pipeline_expectation(world, epoch), loaded);
    EXPECT_EQ(total_of(loaded), kExpectedTotals[static_cast<std::size_t>(epoch - 1)]);
  }
}

// With --async-checkpoint, a failure after an epoch's tasks (here the job's stop condition,
// throwing on every rank after epoch 3) still commits the save in flight, epoch 2's: a
// synchronous run would have committed it before epoch 3 ran.
TEST(AsyncSave, AFailureAfterTheEpochsTasksStillCommitsTheSaveInFlight) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  auto job = jobs::make_sum_pipeline();
  int checks = 0;
  job.add_stop_condition("throws_after_epoch_3", [&](const Workspace&) -> bool {
    if (++checks == 3) {
      throw Error("the stop condition failed");
    }
    return false;
  });
  auto options = options_for(directory.path());
  options.async_checkpoint = true;
  Workspace workspace;
  EXPECT_THROW(JobRunner(std::move(job), world, std::move(options)).run(workspace), Error);
  world.barrier();
  EXPECT_EQ(CheckpointDirectory(directory.path()).committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2}));
}

// Events of `directory`'s metrics.jsonl, in order.
std::vector<std::string> metrics_events(const std::filesystem::path& directory) {
  std::vector<std::string> events;
  std::ifstream lines(directory / kMetricsFileName);
  for (std::string line; std::getline(lines, line);) {
    events.push_back(nlohmann::json::parse(line)["event"]);
  }
  return events;
}

// --async-max-staging-mib with one rank's snapshot over it and the others' under: every rank
// saves that checkpoint synchronously (the ranks agree; a rank in a synchronous save while the
// others start a background one would stall them all until the save timeout).
TEST(AsyncSave, OneRankOverTheStagingLimitMakesEveryRankSaveSynchronously) {
  const auto world = Communicator::world();
  if (world.size() < 2) {
    GTEST_SKIP() << "needs a rank over the limit and one under it";
  }
  ScratchDir scratch(world);
  const auto run = [&](std::uint64_t staging_limit, const std::filesystem::path& directory) {
    Job job("staging_test");
    add_epoch_limiter(job, 3);
    const auto state =
        job.blob<std::uint8_t>("state", {world.rank() == 1 ? std::uint64_t{2} << 20 : 4096});
    job.init_group.add("fill",
                       [&](TaskContext& context) { std::ranges::fill(state.of(context), 1); });
    job.epoch_group.add("step", [&](TaskContext& context) {
      for (auto& byte : state.of(context)) {
        ++byte;
      }
    });
    RunOptions options;
    options.checkpoint_dir = directory;
    options.async_checkpoint = true;
    options.async_max_staging_bytes = staging_limit;
    options.save_timeout = std::chrono::seconds(20);
    Workspace workspace;
    return JobRunner(std::move(job), world, std::move(options)).run(workspace);
  };
  const auto over = run(1 << 20, scratch / "over");
  const auto under = run(4 << 20, scratch / "under");
  EXPECT_EQ(over.committed, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(under.committed, (std::vector<std::int64_t>{0, 1, 2, 3}));
  world.barrier();
  // An asynchronous save ends in a "save" line; a synchronous one is all in its epoch's line.
  EXPECT_EQ(metrics_events(scratch / "over"),
            (std::vector<std::string>{"epoch", "epoch", "epoch", "epoch"}));
  EXPECT_EQ(metrics_events(scratch / "under"),
            (std::vector<std::string>{"epoch", "save", "epoch", "save", "epoch", "save", "epoch"}));
}

}  // namespace
}  // namespace epochrun::testing
