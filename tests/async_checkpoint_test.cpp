// --async-checkpoint against the synchronous save, with sgd_regression on 3 ranks: the
// checkpoint holds the epoch's boundary values although the job changes its state while the
// background write runs; every committed epoch and every resumed run is bit-identical to the
// synchronous run's; a failing background write is an ordinary failed save; a snapshot beyond
// --async-max-staging-mib is saved synchronously. (Kills during a background write are
// fault_tests' KillAnywhere.Asynchronous... trials.) No wait here depends on a timing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "epochrun/blob_file.hpp"
#include "small_sgd_run.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

class AsyncCheckpoint : public ComparedWithSynchronousRun {
 protected:
  static void expect_epochs_as_synchronous(const std::filesystem::path& cwd,
                                           const std::vector<std::int64_t>& epochs) {
    EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(), epochs);
    for (auto epoch : epochs) {
      EXPECT_EQ(epoch_of(cwd, epoch), epoch_of(sync_->path(), epoch)) << "epoch " << epoch;
    }
  }
};

// Rank 0's background write of epoch 2 is held (WAIT) until rank 0 has run epoch 3, which
// updates the model in place, and stopped after it (STOP): only then does the test release the
// write. The file must hold epoch 2's values.
TEST_F(AsyncCheckpoint, TheCheckpointHoldsTheBoundaryValuesWhileTheJobChangesItsState) {
  ScratchDir cwd;
  auto environment = with_fault("save-create@2:0:WAIT,epoch@3:0:STOP");
  environment["EPOCHRUN_FAULT_RELEASE"] = (cwd / "release").string();
  ChildProcess job(small_sgd({"--async-checkpoint"}), cwd.path(), environment);
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never stopped after epoch 3";
  // Epoch 3 ran on rank 0 while its write of epoch 2 waited: nothing of epoch 2 is committed.
  EXPECT_FALSE(CheckpointDirectory(cwd / "D").has_epoch(2));
  write_file(cwd / "release", "");
  ::kill(*paused, SIGCONT);
  auto result = job.wait(kSmallSgdRunSeconds);
  ASSERT_TRUE(result.has_value()) << "the run did not end";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  expect_epochs_as_synchronous(cwd.path(), {0, 1, 2, 3, 4, 5});
}

// An asynchronous run, then asynchronous runs resumed from each of its epochs: all end with the
// synchronous run's final checkpoint and exported model.
TEST_F(AsyncCheckpoint, ResumedFromAnyEpochItEndsBitIdenticalToASynchronousRun) {
  ScratchDir cwd;
  auto result = run_bounded(small_sgd({"--async-checkpoint"}), cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous(cwd.path(), {0, 1, 2, 3, 4, 5});
  const auto model = read_blob_file(sync_->path() / "model.h5");
  EXPECT_EQ(read_blob_file(cwd / "model.h5"), model);
  for (std::int64_t epoch = 0; epoch < kSmallSgdLastEpoch; ++epoch) {
    ScratchDir resumed;
    std::filesystem::create_directory(resumed / "D");
    for (std::int64_t kept = 0; kept <= epoch; ++kept) {
      std::filesystem::copy(CheckpointDirectory(cwd / "D").file_for(kept),
                            CheckpointDirectory(resumed / "D").file_for(kept));
    }
    auto rerun =
        run_bounded(small_sgd({"--async-checkpoint", "--resume-from-epoch", std::to_string(epoch)}),
                    resumed.path());
    ASSERT_EQ(rerun.exit_code, 0) << "from epoch " << epoch << ": " << rerun.err;
    EXPECT_EQ(epoch_of(resumed.path(), kSmallSgdLastEpoch),
              epoch_of(sync_->path(), kSmallSgdLastEpoch))
        << "resumed from epoch " << epoch;
    EXPECT_EQ(read_blob_file(resumed / "model.h5"), model) << "resumed from epoch " << epoch;
  }
}

// Rank 1's background write of epoch 2 fails: epoch 2 is a failed save on every rank, the job
// goes on and ends as the synchronous run does.
TEST_F(AsyncCheckpoint, AFailingBackgroundWriteIsAFailedSaveAndTheJobGoesOn) {
  ScratchDir cwd;
  auto result = run_bounded(small_sgd({"--async-checkpoint", "--summary-json", "s.json"}),
                            cwd.path(), with_fault("save-write@2:1:THROW"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous(cwd.path(), {0, 1, 3, 4, 5});
  const auto summary = nlohmann::json::parse(read_file(cwd / "s.json"));
  ASSERT_EQ(summary["failed_saves"].size(), 1u) << summary;
  EXPECT_EQ(summary["failed_saves"][0]["epoch"], 2) << summary;
  EXPECT_NE(summary["failed_saves"][0]["error"].get<std::string>().find("injected fault"),
            std::string::npos)
      << summary;
  for (const auto& name : list_directory(cwd / "D")) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
}

// With a staging limit below the state's size every save is synchronous, the log says so, and
// the metrics show no background save.
TEST_F(AsyncCheckpoint, ASnapshotBeyondTheStagingLimitIsSavedSynchronously) {
  ScratchDir cwd;
  auto result = run_bounded(
      small_sgd({"--async-checkpoint", "--async-max-staging-mib", "0", "--log-level", "info"}),
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous(cwd.path(), {0, 1, 2, 3, 4, 5});
  const std::string all = result.out + result.err;
  // Epochs 0 to 4 (the last one is synchronous anyway).
  for (std::int64_t epoch = 0; epoch < kSmallSgdLastEpoch; ++epoch) {
    const auto line = all.find("epoch " + std::to_string(epoch) + ": the snapshot (");
    ASSERT_NE(line, std::string::npos) << all;
    EXPECT_NE(all.find("exceeds --async-max-staging-mib 0 on some rank: this checkpoint is saved "
                       "synchronously",
                       line),
              std::string::npos)
        << all;
  }
  EXPECT_EQ(all.find("in the background"), std::string::npos) << all;
  std::istringstream lines(read_file(cwd / "D" / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(nlohmann::json::parse(line)["event"], "epoch") << line;
  }
}

// Whether a page-aligned O_DIRECT write works in `directory` (not on every file system).
bool direct_io_works(const std::filesystem::path& directory) {
  const auto probe = directory / "direct-io-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  void* page = std::aligned_alloc(4096, 4096);
  std::memset(page, 0, 4096);
  const bool works = ::pwrite(fd, page, 4096, 0) == 4096;
  std::free(page);
  ::close(fd);
  std::filesystem::remove(probe);
  return works;
}

// Blobs of 1 MiB and more go from the snapshot to the disk with direct I/O, the unaligned tail
// through the page cache, and the files hold exactly what a synchronous save of the same run
// writes: sgd_regression with 262,000 features on 2 ranks, whose replicated weights (2,096,000
// bytes: 511 pages and 2,944 bytes) and optimizer state (the velocity of the weights and the
// bias, 2,096,008 bytes) rank 0 writes. A synchronous save writes them the same way, from the
// workspace, whose blobs of 1 MiB and more are page-aligned.
TEST(AsyncDirectIo, LargeBlobsWrittenWithDirectIoMatchTheSynchronousSave) {
  auto sgd = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run",
                                     "--job",
                                     "sgd_regression",
                                     "--checkpoint-dir",
                                     "D",
                                     "--sgd_regression.features",
                                     "262000",
                                     "--sgd_regression.samples",
                                     "8",
                                     "--sgd_regression.batch_size",
                                     "4",
                                     "--sgd_regression.max_epochs",
                                     "3",
                                     "--sgd_regression.loss_threshold",
                                     "0",
                                     "--sgd_regression.model_file",
                                     ""};
    args.insert(args.end(), extra.begin(), extra.end());
    return epochrun_on_ranks(2, args);
  };
  ScratchDir sync;
  ScratchDir async;
  if (!direct_io_works(async.path())) {
    GTEST_SKIP() << "the file system of " << async.path() << " refuses direct I/O";
  }
  const auto synchronous = run_bounded(sgd({"--log-level", "debug"}), sync.path());
  ASSERT_EQ(synchronous.exit_code, 0) << synchronous.err;
  const auto background =
      run_bounded(sgd({"--async-checkpoint", "--log-level", "debug"}), async.path());
  ASSERT_EQ(background.exit_code, 0) << background.err;
  // Every save of epochs 0 to 3 (in the asynchronous run, 0 to 2 in the background and the last
  // one synchronously), as rank 0 logs them (the other ranks log warnings only): 511 whole pages
  // of each of the two large blobs directly, their tails and the small blobs (5,936 bytes in
  // all) through the cache.
  const auto direct_saves = [](const std::string& all) {
    std::size_t direct = 0;
    const std::string line = "4186112 of this rank's 4192048 bytes written with direct I/O";
    for (auto at = all.find(line); at != std::string::npos; at = all.find(line, at + 1)) {
      ++direct;
    }
    return direct;
  };
  EXPECT_EQ(direct_saves(synchronous.out + synchronous.err), 4u)
      << synchronous.out + synchronous.err;
  EXPECT_EQ(direct_saves(background.out + background.err), 4u) << background.out + background.err;
  EXPECT_EQ(CheckpointDirectory(async / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2, 3}));
  for (std::int64_t epoch = 0; epoch <= 3; ++epoch) {
    EXPECT_EQ(epoch_of(async.path(), epoch), epoch_of(sync.path(), epoch)) << "epoch " << epoch;
  }
}

}  // namespace
}  // namespace epochrun::testing
