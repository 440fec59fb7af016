// Kill-anywhere recovery. Seeded, reproducible trials kill sgd_regression on 3 ranks -- one rank
// or the whole job, with SIGKILL or SIGTERM -- inside an epoch, inside a save, between the
// rename and the index update, during the upload (reached exactly through EPOCHRUN_FAULT), and
// at random instants (a kill from outside after a random delay). After every trial:
//   - the job ended within a bounded time, every rank included;
//   - every committed epoch holds exactly the uninterrupted run's bytes for that epoch (nothing
//     committed was lost or altered, nothing partial carries a checkpoint's name);
//   - `--resume-from-epoch latest` finishes the job bit-identical to the uninterrupted run:
//     final checkpoint, exported model and uploaded copy.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kLastEpoch = 6;
constexpr int kInjectedTrials = 30;  // 5 per phase
constexpr int kRandomTrials = 11;
constexpr double kJobEndsWithinSeconds = 60;
constexpr double kCommitSeenWithinSeconds = 30;
constexpr std::uint64_t kSeed = 20261122;

std::vector<std::string> job_command(const std::string& resume,
                                     const std::string& checkpoint_dir = "D",
                                     bool asynchronous = false) {
  auto args = small_sgd_regression_options(kLastEpoch);
  if (asynchronous) {
    args.push_back("--async-checkpoint");
  }
  // SIGTERM here is a kill, as a node going down sends it; as a preemption request it is
  // preemption_tests' subject.
  args.insert(args.begin(), {"run", "--checkpoint-dir", checkpoint_dir, "--upload-dir", "U",
                             "--preempt-signals", "none"});
  if (!resume.empty()) {
    args.insert(args.end(), {"--resume-from-epoch", resume});
  }
  return epochrun_on_ranks(3, args);
}

using Contents = CheckpointContents;

// Every node's blobs of a checkpoint file; an unreadable file is a test failure, not an
// exception, so that one bad trial does not stop the others.
Contents contents_of(const std::filesystem::path& file) {
  try {
    return read_checkpoint_contents(file);
  } catch (const std::exception& error) {
    ADD_FAILURE() << error.what();
    return {};
  }
}

struct Trial {
  std::string description;
  std::map<std::string, std::string> environment;  // EPOCHRUN_FAULT for injected trials
  // Injected trials: the newest committed epoch afterwards lies in [at_least, at_most].
  std::optional<std::int64_t> committed_at_least;
  std::optional<std::int64_t> committed_at_most;
  // Random instants: kill from outside once epoch `after_commit_of` has committed, after
  // `epoch_fraction` of the time the run's previous epoch took (as this test saw it).
  std::int64_t after_commit_of = 0;
  double epoch_fraction = 0;
  bool whole_job = false;
  int signal = SIGKILL;
  bool asynchronous = false;  // --async-checkpoint, in the killed run and the resumed one
};

Trial injected_trial(int index, std::mt19937_64& random) {
  const char* phases[] = {
      "epoch", "save-create", "save-write", "save-before-rename", "save-after-rename", "upload"};
  const std::string phase = phases[index % std::size(phases)];
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  const std::int64_t epoch = phase == "upload"  ? kLastEpoch
                             : phase == "epoch" ? pick(1, kLastEpoch)
                                                : pick(0, kLastEpoch);
  // The upload and the index update run on rank 0 only.
  const bool rank_zero_only = phase == "upload";
  const std::int64_t rank = rank_zero_only ? pick(-1, 0) : pick(-1, 2);
  const std::string signal = pick(0, 1) == 0 ? "KILL" : "TERM";
  Trial trial;
  trial.environment["EPOCHRUN_FAULT"] = phase + "@" + std::to_string(epoch) +
                                        (rank >= 0 ? ":" + std::to_string(rank) : "") + ":" +
                                        signal;
  trial.description = "EPOCHRUN_FAULT=" + trial.environment["EPOCHRUN_FAULT"];
  const bool committed = phase == "save-after-rename" || phase == "upload";
  trial.committed_at_least = committed ? epoch : epoch - 1;
  trial.committed_at_most = trial.committed_at_least;
  // Every rank had made the file durable before the fault point: with only a non-root rank
  // dying there, rank 0 may still commit it before the launcher stops the job. Both are right.
  if (phase == "save-before-rename" && rank > 0) {
    trial.committed_at_most = epoch;
  }
  return trial;
}

// With --async-checkpoint: a kill inside the background write (save-create, save-write), in the
// commit on the main thread (save-before-rename), or after an epoch while the save of the one
// before is still in flight (epoch: that save is lost, as it was never committed; the one
// before it stays).
Trial asynchronous_trial(int index, std::mt19937_64& random) {
  const char* phases[] = {"save-create", "save-write", "save-before-rename", "epoch"};
  const std::string phase = phases[index % std::size(phases)];
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  const std::int64_t epoch = phase == "epoch" ? pick(1, kLastEpoch) : pick(0, kLastEpoch - 1);
  const std::int64_t rank = pick(-1, 2);
  Trial trial;
  trial.asynchronous = true;
  trial.environment["EPOCHRUN_FAULT"] =
      phase + "@" + std::to_string(epoch) + (rank >= 0 ? ":" + std::to_string(rank) : "") + ":KILL";
  trial.description = "async, EPOCHRUN_FAULT=" + trial.environment["EPOCHRUN_FAULT"];
  trial.committed_at_least = phase == "epoch" ? epoch - 2 : epoch - 1;
  trial.committed_at_most = trial.committed_at_least;
  if (phase == "save-before-rename" && rank > 0) {
    trial.committed_at_most = epoch;  // as in injected_trial
  }
  return trial;
}

// A random instant of a random epoch of the trial's own run: after the commit of epoch e, a
// random fraction of the time between the commits of e-1 and e. Measuring the pace on the run
// itself spreads the kills over the whole run however fast or loaded the machine is (a window
// measured once on another run put every kill of a loaded machine into the same epoch, or
// after the end).
Trial random_trial(std::mt19937_64& random) {
  Trial trial;
  trial.after_commit_of = std::uniform_int_distribution<std::int64_t>(1, kLastEpoch - 1)(random);
  trial.epoch_fraction = std::uniform_real_distribution<double>(0.0, 1.0)(random);
  trial.whole_job = std::uniform_int_distribution<int>(0, 1)(random) == 0;
  trial.signal =
      trial.whole_job || std::uniform_int_distribution<int>(0, 1)(random) == 0 ? SIGKILL : SIGTERM;
  char text[96];
  std::snprintf(text, sizeof text, "%s, SIG%s, epoch-%lld commit + %.2f epoch",
                trial.whole_job ? "whole job" : "one rank",
                trial.signal == SIGKILL ? "KILL" : "TERM",
                static_cast<long long>(trial.after_commit_of), trial.epoch_fraction);
  trial.description = text;
  return trial;
}

bool process_alive(int pid) {
  return ::kill(pid, 0) == 0;
}

// Waits until the run in `directory` has committed `epoch`, at most `limit_seconds`; returns
// when it saw the commit. Giving up is a failure of its own, naming what the directory held:
// a run that was too slow, or ended, before that commit must not pass for one that lost it.
std::optional<std::chrono::steady_clock::time_point> wait_for_commit(
    const std::filesystem::path& directory, std::int64_t epoch,
    double limit_seconds = kCommitSeenWithinSeconds) {
  const auto file = CheckpointDirectory(directory).file_for(epoch);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_seconds);
  while (!std::filesystem::exists(file)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string seen;
      for (const auto& name : list_directory(directory)) {
        seen += (seen.empty() ? "" : ", ") + name;
      }
      if (seen.empty()) {
        seen = std::filesystem::exists(directory) ? "nothing" : "no such directory";
      }
      ADD_FAILURE() << "gave up after " << limit_seconds << " s waiting for epoch " << epoch
                    << " to be committed in " << directory.string() << "; seen: " << seen;
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return std::chrono::steady_clock::now();
}

int failures_so_far() {
  const auto* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int failed = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    failed += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failed;
}

class KillAnywhere : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_dir_ = new ScratchDir();
    ChildProcess reference_run(job_command(""), reference_dir_->path(), kMpiEnvironment);
    auto result = reference_run.wait(kJobEndsWithinSeconds);
    ASSERT_TRUE(result.has_value());
    ASSERT_EQ(result->exit_code, 0) << result->err;
    reference_ = new std::map<std::int64_t, Contents>();
    for (std::int64_t epoch = 0; epoch <= kLastEpoch; ++epoch) {
      (*reference_)[epoch] =
          contents_of(CheckpointDirectory(reference_dir_->path() / "D").file_for(epoch));
    }
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete reference_dir_;
  }

  void fill_the_disk_during(const std::string& phase);

  // Runs one trial; returns true when it ended identical to the uninterrupted run.
  bool run_trial(const Trial& trial) {
    const int failures_before = failures_so_far();
    ScratchDir cwd;
    const auto directory = cwd / "D";
    auto environment = kMpiEnvironment;
    environment.insert(trial.environment.begin(), trial.environment.end());
    ChildProcess job(job_command("", "D", trial.asynchronous), cwd.path(), environment);
    std::vector<int> ranks;
    // A random trial whose commit this test never saw: it kills nothing, and wait_for_commit
    // has failed it already; whatever the run committed is still checked below.
    std::optional<std::int64_t> never_seen;
    if (!trial.committed_at_least) {
      const auto previous = wait_for_commit(directory, trial.after_commit_of - 1);
      const auto last = previous ? wait_for_commit(directory, trial.after_commit_of) : std::nullopt;
      if (!last) {
        never_seen = previous ? trial.after_commit_of : trial.after_commit_of - 1;
      } else {
        std::this_thread::sleep_for(trial.epoch_fraction * (*last - *previous));
        ranks = job.children();
        if (trial.whole_job) {
          for (int pid : ranks) {
            ::kill(pid, SIGKILL);
          }
          ::kill(job.pid(), SIGKILL);
        } else if (!ranks.empty()) {
          ::kill(ranks[std::hash<std::string>{}(trial.description) % ranks.size()], trial.signal);
        }
      }
    }
    // The job, every rank included, ends within a bounded time even when one rank died alone.
    auto ended = job.wait(kJobEndsWithinSeconds);
    EXPECT_TRUE(ended.has_value())
        << "the job did not end within " << kJobEndsWithinSeconds << " s";
    if (!ended) {
      return false;
    }
    // Reaped zombies are gone from /proc; the pids read before the kill are what is checked.
    if (ranks.empty()) {
      ranks = job.children();
    }
    for (int waited = 0; waited < 3000 && std::any_of(ranks.begin(), ranks.end(), process_alive);
         ++waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(std::any_of(ranks.begin(), ranks.end(), process_alive))
        << "a rank outlived the job";
    if (trial.committed_at_least) {
      EXPECT_NE(ended->exit_code, 0) << "the injected fault did not fire";
    }

    // Nothing committed is lost or altered.
    const auto committed = CheckpointDirectory(directory).committed_epochs();
    outcome_ = "exit " + std::to_string(ended->exit_code) + ", " +
               (committed.empty() ? std::string("nothing committed")
                                  : "committed 0.." + std::to_string(committed.back()));
    if (never_seen) {
      outcome_ =
          "not killed: epoch " + std::to_string(*never_seen) + " commit never seen; " + outcome_;
    }
    for (auto epoch : committed) {
      EXPECT_EQ(contents_of(CheckpointDirectory(directory).file_for(epoch)), reference_->at(epoch))
          << "committed epoch " << epoch << " differs from the uninterrupted run";
    }
    if (!trial.committed_at_least && !never_seen) {
      // A random kill came after the commit it waited for: that epoch must still be there.
      EXPECT_GE(committed.empty() ? -1 : committed.back(), trial.after_commit_of)
          << "a committed epoch was lost: epoch " << trial.after_commit_of
          << " was seen committed before the kill";
    }
    if (trial.committed_at_least) {
      const std::int64_t newest = committed.empty() ? -1 : committed.back();
      EXPECT_GE(newest, *trial.committed_at_least) << "a committed epoch was lost";
      EXPECT_LE(newest, *trial.committed_at_most) << "committed past the fault";
      EXPECT_EQ(committed.size(), static_cast<std::size_t>(newest + 1))
          << "a gap in the committed epochs";
    }

    // Resuming from the latest committed epoch ends exactly as the uninterrupted run did.
    auto resumed =
        run_process(job_command("latest", "D", trial.asynchronous), cwd.path(), kMpiEnvironment);
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto final_file = CheckpointDirectory(directory).file_for(kLastEpoch);
    EXPECT_EQ(contents_of(final_file), reference_->at(kLastEpoch));
    EXPECT_EQ(contents_of(cwd / "U" / checkpoint_file_name(kLastEpoch)),
              reference_->at(kLastEpoch));
    try {
      EXPECT_EQ(read_blob_file(cwd / "model.h5"),
                read_blob_file(reference_dir_->path() / "model.h5"));
    } catch (const std::exception& error) {
      ADD_FAILURE() << "model: " << error.what();
    }
    for (auto epoch : committed) {
      EXPECT_TRUE(CheckpointDirectory(directory).has_epoch(epoch))
          << "epoch " << epoch << " was lost";
    }
    // No temporary file is left behind (a killed save's is removed by the next run).
    for (const auto& where : {directory, cwd / "U"}) {
      for (const auto& name : list_directory(where)) {
        EXPECT_EQ(name.find(".tmp."), std::string::npos) << where / name;
      }
    }
    return failures_so_far() == failures_before;
  }

  // Runs `trials` trials made by `make` from a generator seeded with `seed`, printing one line
  // each; returns how many ended identical to the uninterrupted run.
  template <typename Make>
  int run_trials(int trials, std::uint64_t seed, Make&& make) {
    std::mt19937_64 random(seed);
    int identical = 0;
    for (int index = 0; index < trials; ++index) {
      const Trial trial = make(index, random);
      SCOPED_TRACE("trial " + std::to_string(index + 1) + ": " + trial.description);
      const bool ok = run_trial(trial);
      identical += ok ? 1 : 0;
      std::printf("fault trial %2d/%d  %-48s %-28s %s\n", index + 1, trials,
                  trial.description.c_str(), outcome_.c_str(),
                  ok ? "identical after resume" : "FAILED");
      std::fflush(stdout);
    }
    return identical;
  }

  std::string outcome_;  // of the interrupted run, for the report
  static ScratchDir* reference_dir_;
  static std::map<std::int64_t, Contents>* reference_;
};

ScratchDir* KillAnywhere::reference_dir_ = nullptr;
std::map<std::int64_t, Contents>* KillAnywhere::reference_ = nullptr;

TEST_F(KillAnywhere, EveryTrialResumesBitIdenticalAndLosesNoCommittedEpoch) {
  const int trials = kInjectedTrials + kRandomTrials;
  const int identical = run_trials(trials, kSeed, [](int index, std::mt19937_64& random) {
    return index < kInjectedTrials ? injected_trial(index, random) : random_trial(random);
  });
  std::printf("fault trials: %d run, %d identical to the uninterrupted run (seed %llu)\n", trials,
              identical, static_cast<unsigned long long>(kSeed));
  EXPECT_EQ(identical, trials);
}

// The same with --async-checkpoint: kills in the background write, in its commit, and while a
// save is in flight, plus kills at random instants. The committed epochs are compared with the
// synchronous uninterrupted run's, and so is the resumed asynchronous run.
TEST_F(KillAnywhere, AsynchronousSavesKilledAnywhereLoseNothingCommittedAndResumeBitIdentical) {
  constexpr int kAsynchronousTrials = 8;
  constexpr int kRandomAsynchronousTrials = 3;
  const int trials = kAsynchronousTrials + kRandomAsynchronousTrials;
  const int identical = run_trials(trials, kSeed + 1, [](int index, std::mt19937_64& random) {
    if (index < kAsynchronousTrials) {
      return asynchronous_trial(index, random);
    }
    auto trial = random_trial(random);
    trial.asynchronous = true;
    trial.description = "async, " + trial.description;
    return trial;
  });
  EXPECT_EQ(identical, trials);
}

// Another process takes the disk's last free byte while a save is half-way (rank 0 paused by
// EPOCHRUN_FAULT at `phase` of epoch 2, the disk filled, rank 0 continued). The save reserved
// its space before that, so it still commits, byte-identical to the uninterrupted run; the
// following saves are refused as "not enough space" and the job goes on.
void KillAnywhere::fill_the_disk_during(const std::string& phase) {
  ScratchDir cwd;
  TmpfsMount disk(cwd / "disk", "1m");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  constexpr std::int64_t kFilledDuring = 2;
  const auto environment = with_fault(phase + "@" + std::to_string(kFilledDuring) + ":0:STOP");
  auto command = job_command("", "disk/D");
  command.insert(command.end(), {"--summary-json", "summary.json"});
  ChildProcess job(command, cwd.path(), environment);
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused inside the save";
  EXPECT_EQ(fill_file_system(cwd / "disk" / "filler"), 0u);
  ::kill(*paused, SIGCONT);
  auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(ended.has_value()) << "the job hung after the disk filled mid-save";
  EXPECT_EQ(ended->exit_code, 0) << ended->err;

  const CheckpointDirectory directory(cwd / "disk" / "D");
  const std::vector<std::int64_t> committed = directory.committed_epochs();
  ASSERT_EQ(committed, (std::vector<std::int64_t>{0, 1, kFilledDuring}));
  for (auto epoch : committed) {
    EXPECT_EQ(contents_of(directory.file_for(epoch)), reference_->at(epoch)) << epoch;
  }
  const auto summary = nlohmann::json::parse(read_file(cwd / "summary.json"));
  ASSERT_EQ(summary["failed_saves"].size(), static_cast<std::size_t>(kLastEpoch - kFilledDuring));
  for (const auto& failure : summary["failed_saves"]) {
    EXPECT_GT(failure["epoch"].get<std::int64_t>(), kFilledDuring);
    EXPECT_NE(failure["error"].get<std::string>().find("not enough space"), std::string::npos)
        << failure;
  }
  for (const auto& name : list_directory(cwd / "disk" / "D")) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }

  // Once the space is back, the job resumes from the epoch saved during the fill and ends as
  // the uninterrupted run did.
  std::filesystem::remove(cwd / "disk" / "filler");
  auto resumed = run_process(job_command("latest", "disk/D"), cwd.path(), kMpiEnvironment);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(contents_of(directory.file_for(kLastEpoch)), reference_->at(kLastEpoch));
  EXPECT_EQ(read_blob_file(cwd / "model.h5"), read_blob_file(reference_dir_->path() / "model.h5"));
}

// The file laid out, rank 0's data not written yet. Without the reservation this job hung in
// HDF5's collective close (seen: still running after 60 s).
TEST_F(KillAnywhere, SpaceTakenMidSaveNeitherFailsNorHangsThatSave) {
  fill_the_disk_during("save-create");
}

// The file created and its space reserved, HDF5 not yet laid out. HDF5 creates a file by
// truncating it, which gave that reservation back: its metadata writes then failed with ENOSPC
// (a failed save; and a failed H5Fclose left HDF5 to crash in MPI_Finalize, seen under ASan).
TEST_F(KillAnywhere, SpaceTakenBeforeTheLayOutDoesNotFailThatSave) {
  fill_the_disk_during("save-lay-out");
}

// A task throws on rank 1 while ranks 0 and 2 are already inside the job's own MPI_Allreduce
// (sgd_regression averages its gradients in its epoch task), which rank 1 will never join.
// Rank 1 cannot reach them through the runner's agreement, so after --task-failure-timeout it
// aborts the job: the job ends in bounded time with exit code 1 and the reason in the log,
// nothing committed is lost, and `latest` finishes bit-identical.
TEST_F(KillAnywhere, ATaskFailingWhileTheOthersWaitInTheJobsCollectiveAbortsTheJob) {
  ScratchDir cwd;
  const auto environment = with_fault("epoch-task@3:1:THROW");
  auto command = job_command("");
  command.insert(command.end(), {"--task-failure-timeout", "2"});
  ChildProcess job(command, cwd.path(), environment);
  auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(ended.has_value()) << "the job hung after a task failed on one rank";
  EXPECT_EQ(ended->exit_code, 1) << ended->err;
  EXPECT_NE(ended->err.find("[rank 1] [critical] epoch group: task 'epoch_limiter_countdown' of "
                            "the epoch group on trainer_1: injected fault"),
            std::string::npos)
      << ended->err;
  EXPECT_NE(ended->err.find("did not learn of it within 2 s"), std::string::npos) << ended->err;

  const CheckpointDirectory directory(cwd / "D");
  ASSERT_EQ(directory.committed_epochs(), (std::vector<std::int64_t>{0, 1, 2}));
  for (auto epoch : directory.committed_epochs()) {
    EXPECT_EQ(contents_of(directory.file_for(epoch)), reference_->at(epoch)) << epoch;
  }
  auto resumed = run_process(job_command("latest"), cwd.path(), kMpiEnvironment);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(contents_of(directory.file_for(kLastEpoch)), reference_->at(kLastEpoch));
  EXPECT_EQ(read_blob_file(cwd / "model.h5"), read_blob_file(reference_dir_->path() / "model.h5"));
}

// The bytes of every file in `directory`, by name.
std::map<std::string, std::string> files_in(const std::filesystem::path& directory) {
  std::map<std::string, std::string> files;
  for (const auto& name : list_directory(directory)) {
    files[name] = read_file(directory / name);
  }
  return files;
}

// What a failed save must leave: the job ended in bounded time with exit code 0, the save of
// `failed_epoch` failed on every rank (reported once, in the summary), the epochs committed
// before it kept their bytes, and `latest` finishes bit-identical to the uninterrupted run.
class SaveFailureTest : public KillAnywhere {
 protected:
  void expect_failed_save_handled(const std::optional<ProcessResult>& ended,
                                  const std::filesystem::path& cwd,
                                  const std::filesystem::path& directory, std::int64_t failed_epoch,
                                  const std::map<std::string, std::string>& committed_before) {
    ASSERT_TRUE(ended.has_value()) << "the job hung after a save failed";
    EXPECT_EQ(ended->exit_code, 0) << ended->err;
    const auto summary = nlohmann::json::parse(read_file(cwd / "summary.json"));
    ASSERT_FALSE(summary["failed_saves"].empty()) << summary;
    EXPECT_EQ(summary["failed_saves"][0]["epoch"].get<std::int64_t>(), failed_epoch) << summary;
    for (const auto& [name, bytes] : committed_before) {
      if (parse_checkpoint_file_name(name)) {
        EXPECT_EQ(read_file(directory / name), bytes) << name << " was changed";
      }
    }
    for (auto epoch : CheckpointDirectory(directory).committed_epochs()) {
      EXPECT_EQ(contents_of(CheckpointDirectory(directory).file_for(epoch)), reference_->at(epoch))
          << epoch;
    }
  }

  void expect_latest_finishes_identical(const std::filesystem::path& cwd,
                                        const std::string& checkpoint_dir) {
    auto resumed = run_process(job_command("latest", checkpoint_dir), cwd, kMpiEnvironment);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(contents_of(CheckpointDirectory(cwd / checkpoint_dir).file_for(kLastEpoch)),
              reference_->at(kLastEpoch));
    EXPECT_EQ(read_blob_file(cwd / "model.h5"),
              read_blob_file(reference_dir_->path() / "model.h5"));
  }
};

// A save that fails on one rank right after the file was created (rank 1 throws at
// save-create, while the others go on with the save) fails on every rank, and the job goes on.
// With collective HDF5 the other ranks waited inside collective calls that rank 1 never made.
TEST_F(SaveFailureTest, AFailureOnOneRankRightAfterCreationFailsTheSaveEverywhere) {
  ScratchDir cwd;
  auto command = job_command("");
  command.insert(command.end(), {"--summary-json", "summary.json"});
  ChildProcess job(command, cwd.path(), with_fault("save-create@2:1:THROW"));
  const auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_NO_FATAL_FAILURE(expect_failed_save_handled(ended, cwd.path(), cwd / "D", 2, {}));
  const auto summary = nlohmann::json::parse(read_file(cwd / "summary.json"));
  ASSERT_EQ(summary["failed_saves"].size(), 1u) << summary;
  EXPECT_NE(summary["failed_saves"][0]["error"].get<std::string>().find("rank 1: injected fault"),
            std::string::npos)
      << summary;
  EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 3, 4, 5, 6}));
  for (const auto& name : list_directory(cwd / "D")) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
  expect_latest_finishes_identical(cwd.path(), "D");
}

// The disk fails while a save is in flight: a real ext4 (errors=remount-ro) gets a file system
// error while rank 0 is paused between writing its blobs and fsyncing them, and turns read-only.
// The save fails on every rank (no rank waits forever for one stuck in an I/O error), so do the
// later ones, the job goes on to exit 0, the committed epochs keep their bytes, and once the
// disk is repaired `latest` finishes bit-identical.
TEST_F(SaveFailureTest, AnIoErrorDuringASaveFailsItOnEveryRankWithoutAHang) {
  ScratchDir cwd;
  Ext4LoopMount disk(cwd / "disk", "32M");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a loop-device ext4 here: " << disk.reason();
  }
  constexpr std::int64_t kFailingEpoch = 2;
  auto command = job_command("", "disk/D");
  command.insert(command.end(), {"--summary-json", "summary.json"});
  ChildProcess job(command, cwd.path(),
                   with_fault("save-write@" + std::to_string(kFailingEpoch) + ":0:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused inside the save";
  const auto committed_before = files_in(cwd / "disk" / "D");
  ASSERT_TRUE(disk.trigger_error()) << "cannot trigger an ext4 error here";
  ::kill(*paused, SIGCONT);
  const auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_NO_FATAL_FAILURE(expect_failed_save_handled(ended, cwd.path(), cwd / "disk" / "D",
                                                     kFailingEpoch, committed_before));
  EXPECT_EQ(CheckpointDirectory(cwd / "disk" / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1}));
  const auto summary = nlohmann::json::parse(read_file(cwd / "summary.json"));
  EXPECT_EQ(summary["failed_saves"].size(), static_cast<std::size_t>(kLastEpoch - 1)) << summary;

  ASSERT_TRUE(disk.repair_and_remount());
  expect_latest_finishes_identical(cwd.path(), "disk/D");
}

// Another process grabs every block the moment it is freed, for 1.5 s, while a `--keep-last 2`
// run on a real 24 MiB tmpfs commits, deletes and saves: saves that meet the full disk fail --
// at the pre-flight, at the reservation or while they write -- and their cleanup must not hang
// (it did, about one try in three, inside HDF5's collective truncate of a failed file). Three
// rounds, each grab starting after a later commit.
TEST_F(SaveFailureTest, SpaceGrabbedWhileSavesFailNeverHangsTheirCleanup) {
  for (std::int64_t grab_after = 1; grab_after <= 3; ++grab_after) {
    SCOPED_TRACE("grab after the commit of epoch " + std::to_string(grab_after));
    ScratchDir cwd;
    TmpfsMount disk(cwd / "disk", "24m");
    if (!disk.mounted()) {
      GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
    }
    auto command = job_command("", "disk/D");
    command.insert(command.end(), {"--keep-last", "2", "--summary-json", "summary.json"});
    ChildProcess job(command, cwd.path(), kMpiEnvironment);
    wait_for_commit(cwd / "disk" / "D", grab_after);
    {
      // Grabs whatever is free, again and again, then gives it all back.
      const auto filler = cwd / "disk" / "grabber";
      const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0);
      const std::string block(4096, '\0');
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
      while (std::chrono::steady_clock::now() < until) {
        if (::write(fd, block.data(), block.size()) < 0) {
          std::this_thread::yield();
        }
      }
      ::close(fd);
      std::filesystem::remove(filler);
    }
    const auto ended = job.wait(kJobEndsWithinSeconds);
    ASSERT_TRUE(ended.has_value()) << "the job hung while another process grabbed the space";
    EXPECT_EQ(ended->exit_code, 0) << ended->err;
    const auto summary = nlohmann::json::parse(read_file(cwd / "summary.json"));
    std::printf("grab after the commit of epoch %lld: %zu failed saves\n",
                static_cast<long long>(grab_after), summary["failed_saves"].size());
    for (const auto& failure : summary["failed_saves"]) {
      EXPECT_NE(failure["error"].get<std::string>().find("space"), std::string::npos) << failure;
      std::printf("  %s\n", failure["error"].get<std::string>().c_str());
    }
    const CheckpointDirectory directory(cwd / "disk" / "D");
    for (auto epoch : directory.committed_epochs()) {
      EXPECT_EQ(contents_of(directory.file_for(epoch)), reference_->at(epoch)) << epoch;
    }
    for (const auto& name : list_directory(cwd / "disk" / "D")) {
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    }
    expect_latest_finishes_identical(cwd.path(), "disk/D");
  }
}

// A rank that never reaches a step of the save (here: stopped, as a rank stuck in a hung disk
// would be) cannot hang the job: after --save-timeout, rank 0 names the step and the rank that
// did not come, rank 2 says the same, and the job ends with exit code 1. Nothing committed is
// touched.
TEST_F(SaveFailureTest, ARankStuckInASaveEndsTheJobAfterTheSaveTimeout) {
  ScratchDir cwd;
  auto command = job_command("");
  command.insert(command.end(), {"--save-timeout", "3"});
  ChildProcess job(command, cwd.path(), with_fault("save-write@2:1:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 1 never paused inside the save";
  const auto committed_before = files_in(cwd / "D");
  const auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(ended.has_value()) << "the job hung with a rank stuck in a save";
  EXPECT_EQ(ended->exit_code, 1) << ended->err;
  // Every rank that came says which rank did not (rank 1 itself is stopped and says nothing).
  const std::string verdict = ": write: rank 1 did not arrive within 3 s; aborting the job";
  std::size_t lines = 0;
  for (auto at = ended->err.find(verdict); at != std::string::npos;
       at = ended->err.find(verdict, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2U) << ended->err;
  EXPECT_EQ(ended->err.find("did not answer"), std::string::npos) << ended->err;
  for (const auto& [name, bytes] : committed_before) {
    if (parse_checkpoint_file_name(name)) {
      EXPECT_EQ(read_file(cwd / "D" / name), bytes) << name;
    }
  }
  EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(), (std::vector<std::int64_t>{0, 1}));
  expect_latest_finishes_identical(cwd.path(), "D");
}

// Under umask 000, no file of a run -- the temporaries included, at the instant they exist --
// can be opened for writing by another user. Before, the temporaries were created 0666 and
// switched to 0644 only just before the commit.
TEST(SaveSafety, NoOtherUserCanOpenACheckpointFileForWritingEvenUnderUmask000) {
  ScratchDir cwd;
  std::filesystem::permissions(cwd.path(), std::filesystem::perms(0755));
  const mode_t saved = ::umask(0);
  ChildProcess job(job_command(""), cwd.path(), with_fault("save-create@2:0:STOP"));
  ::umask(saved);
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused inside the save";
  const auto files = list_directory(cwd / "D");
  ASSERT_TRUE(std::any_of(files.begin(), files.end(), [](const std::string& name) {
    return name.find(".tmp.") != std::string::npos;
  })) << "no temporary file at save-create";
  // An unprivileged user tries to open every file of the directory read-write.
  const auto probe = run_process(
      {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
       "for f in D/.* D/*; do [ -f \"$f\" ] && (exec 3<>\"$f\") 2>/dev/null && echo \"$f\"; "
       "done; true"},
      cwd.path());
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_EQ(probe.out, "") << "opened for writing by uid 65534";
  ::kill(*paused, SIGCONT);
  const auto ended = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
}

}  // namespace
}  // namespace epochrun::testing
