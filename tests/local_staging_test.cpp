// --local-dir (node-local staging, as SCR and VeloC do it) with sgd_regression on 3 ranks: each
// save lands in the node-local directory first and is flushed to the checkpoint directory in
// the background; every committed epoch is bit-identical to a synchronous run's and verifies; a
// flush that fails, or whose copy changed after it was made, commits nothing and the job goes
// on; a rank killed during a flush leaves no epoch of that flush committed, and the resume ends
// bit-identical; a resume loads the node-local copies when every rank's is complete and
// verified, and the shared file when one is missing or damaged; a shared file whose metadata is
// damaged is refused however whole its copies are; a --local-dir that cannot be used is refused
// with one line and exit code 2, before anything is written into the checkpoint directory; the
// probe a crashed start-up check left in --local-dir is removed. No wait here depends on a timing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "file_descriptor.hpp"
#include "integrity_header.hpp"
#include "local_copy_files.hpp"
#include "small_sgd_run.hpp"
#include "test_support.hpp"
#include "three_hosts.hpp"

namespace epochrun::testing {
namespace {

class LocalStaging : public ComparedWithSynchronousRun {
 protected:
  void SetUp() override { std::filesystem::create_directory(cwd_ / "L"); }

  // The committed epochs are `epochs`, each the synchronous run's, and they all verify.
  void expect_epochs_as_synchronous(const std::vector<std::int64_t>& epochs) {
    EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), epochs);
    for (auto epoch : epochs) {
      EXPECT_EQ(epoch_of(cwd_.path(), epoch), epoch_of(sync_->path(), epoch)) << "epoch " << epoch;
    }
    const auto verified =
        run_bounded({EPOCHRUN_BINARY, "inspect", "D", "--verify"}, cwd_.path(), {});
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
    for (const auto& name : list_directory(cwd_ / "D")) {
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name << " left in D";
    }
  }

  // `--resume-from-epoch latest` with the node-local copies of L, logging which it loads.
  ProcessResult resume_latest_with_copies() const {
    return run_bounded(
        small_sgd({"--local-dir", "L", "--resume-from-epoch", "latest", "--log-level", "info"}),
        cwd_.path());
  }

  // The run ended as the synchronous one: last epoch and exported model.
  void expect_end_as_synchronous() {
    EXPECT_EQ(epoch_of(cwd_.path(), kSmallSgdLastEpoch),
              epoch_of(sync_->path(), kSmallSgdLastEpoch));
    EXPECT_EQ(read_blob_file(cwd_ / "model.h5"), read_blob_file(sync_->path() / "model.h5"));
  }

  // What the node-local directory holds: exactly every rank's copy of `epoch`.
  void expect_local_copies_of(std::int64_t epoch) {
    std::vector<std::string> expected;
    for (int rank = 0; rank < 3; ++rank) {
      expected.push_back(copy_of(cwd_.path(), epoch, rank).filename().string());
    }
    auto found = list_directory(cwd_ / "L");
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, expected);
  }

  ScratchDir cwd_;
};

TEST_F(LocalStaging, EveryCommittedEpochIsTheSynchronousRunsAndVerifies) {
  auto result = run_bounded(small_sgd({"--local-dir", "L", "--log-level", "info"}), cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
  expect_end_as_synchronous();
  // Epochs 0 to 4 are staged and flushed in the background; the last one at once.
  const auto all = result.out + result.err;
  const auto epoch_1 = all.find("epoch 1 done in");
  ASSERT_NE(epoch_1, std::string::npos) << all;
  EXPECT_EQ(all.find("checkpoint staged in L (", epoch_1), all.find("; ", epoch_1) + 2) << all;
  EXPECT_NE(all.find("flushed to the checkpoint directory in the background"), std::string::npos)
      << all;
  expect_local_copies_of(kSmallSgdLastEpoch);
}

// With --async-checkpoint too the same: the node-local copy is the snapshot.
TEST_F(LocalStaging, WithAsyncCheckpointTooEveryCommittedEpochIsTheSynchronousRuns) {
  auto result = run_bounded(small_sgd({"--local-dir", "L", "--async-checkpoint"}), cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
  expect_end_as_synchronous();
}

// Rank 1's flush of epoch 2 fails: a failed save on every rank, nothing of epoch 2 committed,
// the job goes on and ends as the synchronous run does.
TEST_F(LocalStaging, AFailingFlushIsAFailedSaveAndTheJobGoesOn) {
  auto result = run_bounded(small_sgd({"--local-dir", "L", "--summary-json", "s.json"}),
                            cwd_.path(), with_fault("save-write@2:1:THROW"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  expect_epochs_as_synchronous({0, 1, 3, 4, 5});
  expect_end_as_synchronous();
  const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
  ASSERT_EQ(summary["failed_saves"].size(), 1u) << summary;
  EXPECT_EQ(summary["failed_saves"][0]["epoch"], 2) << summary;
  expect_local_copies_of(kSmallSgdLastEpoch);
}

// Rank 0's copy of epoch 2 is damaged after it was written, before its flush reads it (the
// flush is held until then): the flush hashes what it reads, finds the copy changed, and epoch
// 2 is a failed save; nothing damaged is committed.
TEST_F(LocalStaging, ACopyChangedBeforeItsFlushIsNeverCommitted) {
  auto environment = with_fault("save-create@2:0:WAIT");
  environment["EPOCHRUN_FAULT_RELEASE"] = (cwd_ / "release").string();
  ChildProcess job(small_sgd({"--local-dir", "L", "--summary-json", "s.json"}), cwd_.path(),
                   environment);
  const auto copy = copy_of(cwd_.path(), 2, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(copy) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(std::filesystem::exists(copy)) << "rank 0 never wrote its copy of epoch 2";
  damage_first_byte(copy);
  write_file(cwd_ / "release", "");
  auto result = job.wait(kSmallSgdRunSeconds);
  ASSERT_TRUE(result.has_value()) << "the run did not end";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  expect_epochs_as_synchronous({0, 1, 3, 4, 5});
  const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
  ASSERT_EQ(summary["failed_saves"].size(), 1u) << summary;
  EXPECT_NE(summary["failed_saves"][0]["error"].get<std::string>().find("the copy changed since"),
            std::string::npos)
      << summary;
}

// Rank 1 is SIGKILLed in its flush of epoch 2: the job ends, epoch 2 is not committed and the
// committed ones are the synchronous run's; the resume ends bit-identical.
TEST_F(LocalStaging, ARankKilledDuringAFlushCommitsNothingOfItAndTheResumeIsExact) {
  auto killed =
      run_bounded(small_sgd({"--local-dir", "L"}), cwd_.path(), with_fault("save-write@2:1:KILL"));
  EXPECT_NE(killed.exit_code, 0) << killed.err;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), (std::vector<std::int64_t>{0, 1}));
  auto resumed =
      run_bounded(small_sgd({"--local-dir", "L", "--resume-from-epoch", "latest"}), cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
  expect_end_as_synchronous();
  expect_local_copies_of(kSmallSgdLastEpoch);
}

// A run stopped after epoch 3, resumed on the same ranks: it loads the node-local copies (the
// log says so) and ends bit-identical to the synchronous run.
TEST_F(LocalStaging, AResumeLoadsTheCompleteNodeLocalCopies) {
  auto first = run_bounded(small_sgd({"--local-dir", "L", "--num-epochs", "3"}), cwd_.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  expect_local_copies_of(3);
  auto resumed = resume_latest_with_copies();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("from epoch 3 (the node-local copies in L, each verified against D/"),
            std::string::npos)
      << all;
  expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
  expect_end_as_synchronous();
}

// The copies stand in for the shared file only once the shared file passed the judge that every
// reader asks (docs/FORMAT.md, "What every reader checks"): with one byte of its HDF5 metadata
// changed (the superblock's first), a resume from it is refused with exit 3, and `latest` skips
// it with its warning and resumes from epoch 2 (whose copies are gone: the shared file), ending
// bit-identical. Before, the resume read the layout record without the metadata hash and loaded
// epoch 3 from the copies.
TEST_F(LocalStaging, ACopyDoesNotStandInForASharedFileWhoseMetadataIsDamaged) {
  auto first = run_bounded(small_sgd({"--local-dir", "L", "--num-epochs", "3"}), cwd_.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto shared = cwd_ / "D" / "epoch-000003.h5";
  {
    const FileDescriptor fd(::open(shared.c_str(), O_RDWR));
    const auto superblock =
        static_cast<off_t>(read_integrity_header(fd.get(), "t").user_block_size);
    char byte = 0;
    ASSERT_EQ(::pread(fd.get(), &byte, 1, superblock), 1);
    byte = static_cast<char>(byte ^ 0xff);
    ASSERT_EQ(::pwrite(fd.get(), &byte, 1, superblock), 1);
  }
  const std::string damage = "its HDF5 metadata does not match the checksum recorded at commit";
  auto explicit_epoch =
      run_bounded(small_sgd({"--local-dir", "L", "--resume-from-epoch", "3"}), cwd_.path());
  EXPECT_EQ(explicit_epoch.exit_code, 3) << explicit_epoch.err;
  EXPECT_NE(explicit_epoch.err.find(damage), std::string::npos) << explicit_epoch.err;
  auto resumed = resume_latest_with_copies();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("skipping corrupt checkpoint of epoch 3"), std::string::npos) << all;
  EXPECT_NE(all.find(damage), std::string::npos) << all;
  EXPECT_NE(all.find("from epoch 2 (D/epoch-000002.h5)"), std::string::npos) << all;
  expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
  expect_end_as_synchronous();
}

// The same with rank 1's copy damaged, and then with rank 2's missing: the ranks agree to load
// the shared file, and the run ends bit-identical.
TEST_F(LocalStaging, AResumeLoadsTheSharedFileWhenACopyIsDamagedOrMissing) {
  for (const bool damaged : {true, false}) {
    SCOPED_TRACE(damaged ? "damaged" : "missing");
    std::filesystem::remove_all(cwd_ / "D");
    std::filesystem::remove_all(cwd_ / "L");
    std::filesystem::create_directory(cwd_ / "L");
    auto first = run_bounded(small_sgd({"--local-dir", "L", "--num-epochs", "3"}), cwd_.path());
    ASSERT_EQ(first.exit_code, 0) << first.err;
    if (damaged) {
      damage_first_byte(copy_of(cwd_.path(), 3, 1));
    } else {
      std::filesystem::remove(copy_of(cwd_.path(), 3, 2));
    }
    auto resumed = resume_latest_with_copies();
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto all = resumed.out + resumed.err;
    EXPECT_NE(all.find("not loading the node-local copies in L"), std::string::npos) << all;
    EXPECT_NE(all.find(damaged ? "checksum mismatch" : "No such file or directory"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("from epoch 3 (D/epoch-000003.h5)"), std::string::npos) << all;
    expect_epochs_as_synchronous({0, 1, 2, 3, 4, 5});
    expect_end_as_synchronous();
  }
}

// Backup-and-restore: the checkpoints deleted at the end take the node-local copies with them.
TEST_F(LocalStaging, DeletingTheCheckpointsOnSuccessDeletesTheNodeLocalCopies) {
  auto result =
      run_bounded(small_sgd({"--local-dir", "L", "--delete-checkpoints-on-success"}), cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(CheckpointDirectory(cwd_ / "D").committed_epochs().empty());
  EXPECT_TRUE(list_directory(cwd_ / "L").empty());
}

// heat_diffusion, whose state is a global array over a process grid: stopped after epoch 3 and
// resumed from the node-local copies (each rank's block), it ends as a synchronous run does.
TEST_F(LocalStaging, AGlobalArrayIsStagedFlushedAndResumedExactly) {
  const std::vector<std::string> heat = {"run",
                                         "--job",
                                         "heat_diffusion",
                                         "--checkpoint-dir",
                                         "D",
                                         "--heat_diffusion.rows",
                                         "64",
                                         "--heat_diffusion.columns",
                                         "96",
                                         "--heat_diffusion.max_epochs",
                                         "5",
                                         "--heat_diffusion.tolerance",
                                         "0",
                                         "--log-level",
                                         "info"};
  const auto with = [&](const std::vector<std::string>& extra) {
    auto args = heat;
    args.insert(args.end(), extra.begin(), extra.end());
    return epochrun_on_ranks(3, args);
  };
  ScratchDir synchronous;
  ASSERT_EQ(run_bounded(with({}), synchronous.path()).exit_code, 0);
  auto first = run_bounded(with({"--local-dir", "L", "--num-epochs", "3"}), cwd_.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed =
      run_bounded(with({"--local-dir", "L", "--resume-from-epoch", "latest"}), cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("from epoch 3 (the node-local copies in L"), std::string::npos) << all;
  const auto epochs = CheckpointDirectory(cwd_ / "D").committed_epochs();
  EXPECT_EQ(epochs, CheckpointDirectory(synchronous / "D").committed_epochs());
  for (auto epoch : epochs) {
    EXPECT_EQ(everything_in(CheckpointDirectory(cwd_ / "D").file_for(epoch)),
              everything_in(CheckpointDirectory(synchronous / "D").file_for(epoch)))
        << "epoch " << epoch;
  }
}

// A resume on another rank count never looks at the copies (they are another rank count's).
TEST_F(LocalStaging, AResumeOnAnotherRankCountLoadsTheSharedFile) {
  auto first = run_bounded(small_sgd({"--local-dir", "L", "--num-epochs", "3"}), cwd_.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto on_two_ranks = small_sgd_regression_run(
      2, kSmallSgdLastEpoch,
      {"--local-dir", "L", "--resume-from-epoch", "latest", "--log-level", "info"});
  auto resumed = run_bounded(on_two_ranks, cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_EQ(all.find("node-local copies in L, each verified"), std::string::npos) << all;
  EXPECT_NE(all.find("written by 3 ranks, now 2"), std::string::npos) << all;
}

// A --local-dir that cannot be used (one that is missing is created): one line on stderr, exit
// code 2, nothing committed.
TEST_F(LocalStaging, AnUnusableLocalDirectoryIsRefusedWithOneLine) {
  write_file(cwd_ / "a-file", "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a-file/below", "cannot hold node-local copies"},
      {"a-file", "cannot hold node-local copies"},
      {"D", "is the checkpoint directory itself"},
      {"./D/", "is the checkpoint directory itself"},
      {"/proc", "cannot hold node-local copies"},
  };
  for (const auto& [local, why] : cases) {
    SCOPED_TRACE(local);
    auto result = run_bounded(small_sgd({"--local-dir", local}), cwd_.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    const auto lines = error_lines(result);
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_NE(lines[0].find(why), std::string::npos) << lines[0];
    EXPECT_TRUE(CheckpointDirectory(cwd_ / "D").committed_epochs().empty());
  }
  auto contradiction = run_bounded(epochrun_on_ranks(1, {"run", "--job", "sum_pipeline",
                                                         "--no-checkpoints", "--local-dir", "L"}),
                                   cwd_.path());
  EXPECT_EQ(contradiction.exit_code, 2) << contradiction.err;
}

// A --local-dir refused on some rank writes nothing at all: exit 2, one line naming the rank and
// its host once, and no checkpoint directory (README's exit codes: "no file written"). A
// read-only tmpfs as every rank's --local-dir; then on three hosts (three_hosts.hpp), only host 3's
// node-local directory read-only; and the unusable directories of the test above. Before: the
// checkpoint directory and its lock file were created before --local-dir was checked, and on three
// hosts the line said "rank 2: rank 2 on rt-h3".
TEST_F(LocalStaging, ARefusedLocalDirectoryWritesNothingIntoTheCheckpointDirectory) {
  const TmpfsMount read_only(cwd_ / "R" / "L", "1m", TmpfsMount::kReadOnly);
  if (!read_only.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  }
  {
    auto args = small_sgd_regression_options(kSmallSgdLastEpoch);
    args.insert(args.begin(), {"run", "--checkpoint-dir", "R/ck", "--local-dir", "R/L"});
    auto result = run_bounded(epochrun_on_ranks(3, args), cwd_.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    const auto lines = error_lines(result);
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_NE(lines[0].find("rank 0 on "), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("--local-dir 'R/L' cannot hold node-local copies: "), std::string::npos)
        << lines[0];
    EXPECT_NE(lines[0].find("Read-only file system"), std::string::npos) << lines[0];
    EXPECT_FALSE(std::filesystem::exists(cwd_ / "R" / "ck")) << "the checkpoint directory was made";
  }
  write_file(cwd_ / "a-file", "");
  for (const auto* local : {"a-file/below", "a-file", "D", "./D/", "/proc"}) {
    SCOPED_TRACE(local);
    auto result = run_bounded(small_sgd({"--local-dir", local}), cwd_.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_FALSE(std::filesystem::exists(cwd_ / "D")) << "the checkpoint directory was made";
  }
  if (!can_name_hosts()) {
    GTEST_SKIP() << "cannot give a process a host name of its own (unshare --uts needs root)";
  }
  const TmpfsMount host_3(host_dir(cwd_.path(), 2) / "L", "1m", TmpfsMount::kReadOnly);
  ASSERT_TRUE(host_3.mounted());
  auto args = small_sgd_regression_options(kSmallSgdLastEpoch);
  args.insert(args.begin(), {"run", "--checkpoint-dir", (cwd_ / "R" / "ck").string(), "--local-dir",
                             "L", "--flush-every", "3"});
  auto result = run_bounded(epochrun_on_three_hosts(cwd_.path(), args), cwd_.path());
  EXPECT_EQ(result.exit_code, 2) << result.err;
  const auto lines = error_lines(result);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_NE(lines[0].find("rank 2 on rt-h3: --local-dir 'L' cannot hold node-local copies: "),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find("rank 2: "), std::string::npos) << lines[0];
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "R" / "ck")) << "the checkpoint directory was made";
}

// The probe of the start-up check of --local-dir (L/.probe.local.tmp.<pid>.<16 hex digits>)
// that a crash between its creation and its removal left is removed by the next run that holds
// the checkpoint directory's lock: only a regular file of exactly that name; a symlink of that
// name (and what it points to), a directory of that name and look-alikes stay, and so does the
// probe under --no-directory-lock. Before: nothing ever removed it.
TEST_F(LocalStaging, AProbeOfACrashedLocalDirectoryCheckIsRemoved) {
  const std::string probe = ".probe.local.tmp.4242.0123456789abcdef";
  const std::string link = ".probe.local.tmp.4243.fedcba9876543210";
  const std::string directory = ".probe.local.tmp.4244.00112233445566aa";
  const std::vector<std::string> alike = {".probe.local.tmp.4245.0123",
                                          ".probe.localx.tmp.4246.0123456789abcdef", "probe.local"};
  write_file(cwd_ / "outside", "not a probe\n");
  const auto plant = [&] {
    write_file(cwd_ / "L" / probe, "");
    std::filesystem::create_directory(cwd_ / "L" / directory);
    for (const auto& name : alike) {
      write_file(cwd_ / "L" / name, "");
    }
    if (!std::filesystem::is_symlink(cwd_ / "L" / link)) {
      std::filesystem::create_symlink(cwd_ / "outside", cwd_ / "L" / link);
    }
  };
  const auto expect_left_alone = [&] {
    EXPECT_TRUE(std::filesystem::is_symlink(cwd_ / "L" / link));
    EXPECT_EQ(read_file(cwd_ / "outside"), "not a probe\n");
    EXPECT_TRUE(std::filesystem::is_directory(cwd_ / "L" / directory));
    for (const auto& name : alike) {
      EXPECT_TRUE(std::filesystem::exists(cwd_ / "L" / name)) << name;
    }
  };
  plant();
  auto unlocked = run_bounded(
      small_sgd({"--local-dir", "L", "--no-directory-lock", "--num-epochs", "1"}), cwd_.path());
  ASSERT_EQ(unlocked.exit_code, 0) << unlocked.err;
  EXPECT_TRUE(std::filesystem::exists(cwd_ / "L" / probe)) << "removed without the lock";
  expect_left_alone();

  auto locked = run_bounded(
      small_sgd({"--local-dir", "L", "--resume-from-epoch", "latest", "--log-level", "info"}),
      cwd_.path());
  ASSERT_EQ(locked.exit_code, 0) << locked.err;
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "L" / probe));
  EXPECT_NE((locked.out + locked.err)
                .find("removed 1 probe file(s) of an interrupted start-up "
                      "check from L"),
            std::string::npos)
      << locked.out + locked.err;
  expect_left_alone();
}

}  // namespace
}  // namespace epochrun::testing
