// Preemption as a user meets it: `mpiexec -n 3 epochrun run ...` gets a signal (on one rank, or
// on mpiexec itself) and must stop after the epoch in progress with that epoch committed, exit
// with the requeue code 75 and a summary saying why, skip the steps of a finished job, and
// leave a directory that `--resume-from-epoch latest` finishes bit-identical to an
// uninterrupted run. "Mid-epoch" and "mid-save" are reached exactly with EPOCHRUN_FAULT=...STOP
// (docs/TESTING.md): the rank is paused there while the test sends its signal.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kLastEpoch = 6;
constexpr double kJobEndsWithinSeconds = 120;

std::vector<std::string> job_command(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"run",
                                   "--job",
                                   "sgd_regression",
                                   "--checkpoint-dir",
                                   "D",
                                   "--summary-json",
                                   "S.json",
                                   "--sgd_regression.features",
                                   "4",
                                   "--sgd_regression.samples",
                                   "768",
                                   "--sgd_regression.max_epochs",
                                   std::to_string(kLastEpoch),
                                   "--sgd_regression.loss_threshold",
                                   "0",
                                   "--sgd_regression.model_file",
                                   "model.h5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return epochrun_on_ranks(3, args);
}

using Contents = CheckpointContents;

nlohmann::json read_json(const std::filesystem::path& file) {
  return nlohmann::json::parse(read_file(file));
}

std::vector<std::string> temporaries_in(const std::filesystem::path& directory) {
  std::vector<std::string> found;
  for (const auto& name : list_directory(directory)) {
    if (name.find(".tmp.") != std::string::npos) {
      found.push_back(name);
    }
  }
  return found;
}

// True once `signal` is pending for `pid` (a stopped process keeps it pending), waiting at
// most 30 s.
bool wait_until_pending(int pid, int signal) {
  const unsigned long long bit = 1ULL << (signal - 1);
  for (int waited = 0; waited < 3000; ++waited) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
        if (std::stoull(line.substr(7), nullptr, 16) & bit) {
          return true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Sends `signal` to the paused rank `pid`, then lets it go on.
void signal_paused_rank(int pid, int signal) {
  ::kill(pid, signal);
  ::kill(pid, SIGCONT);
}

// Runs `command` with `fault` (a STOP), sends `signal` to the rank it pauses and returns how the
// job ended: nullopt, the test failed, when no rank paused or the job did not end in time.
std::optional<ProcessResult> signal_the_paused_rank(const std::vector<std::string>& command,
                                                    const std::filesystem::path& cwd,
                                                    const std::string& fault, int signal) {
  ChildProcess job(command, cwd, with_fault(fault));
  const auto paused = wait_for_a_stopped_child(job);
  if (!paused) {
    ADD_FAILURE() << "no rank paused at " << fault;
    return std::nullopt;
  }
  signal_paused_rank(*paused, signal);
  auto result = job.wait(kJobEndsWithinSeconds);
  if (!result) {
    ADD_FAILURE() << "the job did not end after the signal";
  }
  return result;
}

class Preemption : public ::testing::Test {
 protected:
  // The uninterrupted run: every epoch's checkpoint contents and the exported model.
  static void SetUpTestSuite() {
    reference_dir_ = new ScratchDir();
    auto result = run_process(job_command(), reference_dir_->path(), kMpiEnvironment);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    reference_ = new std::map<std::int64_t, Contents>();
    for (std::int64_t epoch = 0; epoch <= kLastEpoch; ++epoch) {
      (*reference_)[epoch] = read_checkpoint_contents(
          CheckpointDirectory(reference_dir_->path() / "D").file_for(epoch));
    }
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete reference_dir_;
  }

  // Each committed epoch in D holds exactly the uninterrupted run's state of that epoch.
  void expect_committed_as_uninterrupted(const std::vector<std::int64_t>& epochs) {
    EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), epochs);
    for (auto epoch : epochs) {
      EXPECT_EQ(read_checkpoint_contents(CheckpointDirectory(cwd_ / "D").file_for(epoch)),
                reference_->at(epoch))
          << "epoch " << epoch;
    }
  }

  // `--resume-from-epoch latest` finishes the job; its final checkpoint and model are the
  // uninterrupted run's, and no temporary file is left.
  ProcessResult expect_resume_finishes_as_uninterrupted() {
    auto resumed =
        run_process(job_command({"--resume-from-epoch", "latest"}), cwd_.path(), kMpiEnvironment);
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(read_checkpoint_contents(CheckpointDirectory(cwd_ / "D").file_for(kLastEpoch)),
              reference_->at(kLastEpoch));
    EXPECT_EQ(read_blob_file(cwd_ / "model.h5"),
              read_blob_file(reference_dir_->path() / "model.h5"));
    EXPECT_TRUE(temporaries_in(cwd_ / "D").empty());
    return resumed;
  }

  static ScratchDir* reference_dir_;
  static std::map<std::int64_t, Contents>* reference_;
  ScratchDir cwd_;
};

ScratchDir* Preemption::reference_dir_ = nullptr;
std::map<std::int64_t, Contents>* Preemption::reference_ = nullptr;

TEST_F(Preemption, ASignalOnOneRankMidEpochCommitsThatEpochAndExits75) {
  const auto result = signal_the_paused_rank(job_command({"--upload-dir", "U"}), cwd_.path(),
                                             "epoch-task@3:1:STOP", SIGUSR1);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->exit_code, 75) << result->err;

  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["stop_kind"], "preempted");
  EXPECT_EQ(summary["stop_reason"], "preempted (SIGUSR1 on rank 1)");
  EXPECT_EQ(summary["exit_code"], 75);
  EXPECT_EQ(summary["last_epoch"], 3);
  EXPECT_EQ(summary["last_committed_epoch"], 3);
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(summary["restart_count"], 0);
  EXPECT_TRUE(summary["slurm_job_id"].is_null());
  // Upload, download and exit groups belong to the finished job.
  EXPECT_TRUE(summary["uploaded_to"].is_null());
  EXPECT_EQ(summary["outputs"], nlohmann::json::object());
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "U"));
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "model.h5"));
  EXPECT_NE(result->err.find("stopping: preempted (SIGUSR1 on rank 1)"), std::string::npos)
      << result->err;
  expect_committed_as_uninterrupted({0, 1, 2, 3});

  expect_resume_finishes_as_uninterrupted();
  const auto resumed = read_json(cwd_ / "S.json");
  EXPECT_EQ(resumed["resumed_from"], 3);
  EXPECT_EQ(resumed["stop_kind"], "stop_condition");
  EXPECT_EQ(resumed["exit_code"], 0);
}

// A signal during a save, after that epoch's decision: the checkpoint commits and the run stops
// before it starts another epoch.
TEST_F(Preemption, ASignalDuringASaveStopsBeforeTheNextEpoch) {
  const auto result =
      signal_the_paused_rank(job_command(), cwd_.path(), "save-create@3:2:STOP", SIGTERM);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["stop_reason"], "preempted (SIGTERM on rank 2)");
  EXPECT_EQ(summary["last_epoch"], 3);
  EXPECT_EQ(summary["epochs_run"], 3);
  EXPECT_EQ(summary["last_committed_epoch"], 3);
  EXPECT_NE(result->err.find("stopping before epoch 4: preempted"), std::string::npos)
      << result->err;
  expect_committed_as_uninterrupted({0, 1, 2, 3});
  expect_resume_finishes_as_uninterrupted();
}

// A signal while a rank is starting -- before MPI_Init, its options just parsed (the start-up
// fault point), as SLURM's early warning or a `scancel --signal` can come -- does not end it:
// the run stops at its first decision, before epoch 1, with init's epoch committed and exit 75.
// The same again at the start of the resumed run (a signal right after a requeue): it stops
// before running any epoch, nothing lost. Then the job finishes as if never interrupted.
TEST_F(Preemption, ASignalWhileARankStartsStopsTheRunBeforeItsFirstEpoch) {
  for (const bool resumed : {false, true}) {
    SCOPED_TRACE(resumed ? "the resumed run" : "the first run");
    const auto result = signal_the_paused_rank(
        resumed ? job_command({"--resume-from-epoch", "latest"}) : job_command(), cwd_.path(),
        "start-up@0:1:STOP", SIGUSR1);
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->exit_code, 75) << result->err;
    const auto summary = read_json(cwd_ / "S.json");
    EXPECT_EQ(summary["stop_kind"], "preempted");
    EXPECT_EQ(summary["stop_reason"], "preempted (SIGUSR1 on rank 1)");
    EXPECT_EQ(summary["epochs_run"], 0);
    EXPECT_EQ(summary["last_committed_epoch"], 0);
    EXPECT_NE(result->err.find("stopping before epoch 1: preempted"), std::string::npos)
        << result->err;
    expect_committed_as_uninterrupted({0});
  }
  expect_resume_finishes_as_uninterrupted();
}

// The start-up catch takes only what the run would have caught: with `--preempt-signals USR2`
// a SIGUSR1 that came while the rank started gets its default action back (the rank ends of it,
// as it would have without the catch) once the run has read its options.
TEST_F(Preemption, AStartUpSignalTheRunDoesNotListEndsTheRankAsWithoutTheCatch) {
  const auto result = signal_the_paused_rank(job_command({"--preempt-signals", "USR2"}),
                                             cwd_.path(), "start-up@0:1:STOP", SIGUSR1);
  ASSERT_TRUE(result.has_value());
  EXPECT_NE(result->exit_code, 0);
  EXPECT_NE(result->exit_code, 75);
  EXPECT_NE((result->out + result->err).find("exited on signal 10"), std::string::npos)
      << result->out << result->err;
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "S.json"));
}

// More preemption signals while the last epoch is being saved: the same SIGUSR1 again (a rank
// of a multi-node SLURM job gets it from the batch shell and from slurmstepd) and a SIGTERM (SLURM
// ending the job). Each is the same request: the rank finishes the save, the epoch commits and
// the run exits 75 as after one signal (docs/PREEMPTION.md).
TEST_F(Preemption, RepeatedSignalsMidSaveAreOneRequestAndTheEpochCommits) {
  ChildProcess job(job_command(), cwd_.path(),
                   with_fault("epoch-task@3:1:STOP,save-write@3:1:STOP"));
  const auto in_epoch = wait_for_a_stopped_child(job);
  ASSERT_TRUE(in_epoch.has_value()) << "rank 1 never paused in epoch 3";
  signal_paused_rank(*in_epoch, SIGUSR1);
  const auto in_save = wait_for_a_stopped_child(job);
  ASSERT_TRUE(in_save.has_value()) << "rank 1 never paused in the save of epoch 3";
  ::kill(*in_save, SIGUSR1);
  ::kill(*in_save, SIGTERM);
  ASSERT_TRUE(wait_until_pending(*in_save, SIGTERM));
  ::kill(*in_save, SIGCONT);
  const auto result = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(result.has_value()) << "the job did not end after the repeated signals";
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["stop_reason"], "preempted (SIGUSR1 on rank 1)");
  EXPECT_EQ(summary["last_committed_epoch"], 3);
  expect_committed_as_uninterrupted({0, 1, 2, 3});
  EXPECT_TRUE(temporaries_in(cwd_ / "D").empty());
  const auto resumed = expect_resume_finishes_as_uninterrupted();
  EXPECT_EQ(read_json(cwd_ / "S.json")["resumed_from"], 3);
}

// Open MPI's mpirun forwards SIGUSR1 to every rank: the same stop as a signal on the ranks,
// and mpirun's own exit code is the ranks' 75.
TEST_F(Preemption, KillUsr1OfMpirunStopsTheJobWithItsCheckpointAndExit75) {
  ChildProcess job(job_command(), cwd_.path(), with_fault("epoch-task@3:0:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused in epoch 3";
  ::kill(job.pid(), SIGUSR1);
  // Forwarded asynchronously: let rank 0 go on only once the signal has reached it.
  ASSERT_TRUE(wait_until_pending(*paused, SIGUSR1)) << "mpirun did not forward SIGUSR1";
  ::kill(*paused, SIGCONT);
  const auto result = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(result.has_value()) << "the preempted job did not end";
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["stop_kind"], "preempted");
  EXPECT_EQ(summary["stop_reason"], "preempted (SIGUSR1 on rank 0)");
  EXPECT_EQ(summary["last_committed_epoch"], 3);
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "model.h5"));
  expect_committed_as_uninterrupted({0, 1, 2, 3});
  expect_resume_finishes_as_uninterrupted();
}

// Open MPI 4.1's mpirun does not forward SIGTERM (ess_base_forward_signals refuses it): it
// terminates the job, SIGTERM to the ranks and SIGKILL odls_base_sigkill_timeout (1 s) later,
// and exits 1 (docs/PREEMPTION.md). What is committed survives and the resume is exact.
TEST_F(Preemption, KillTermOfMpirunEndsTheJobAndTheResumeIsExact) {
  ChildProcess job(job_command(), cwd_.path(), with_fault("epoch-task@3:0:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused in epoch 3";
  ::kill(job.pid(), SIGTERM);
  const auto result = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(result.has_value()) << "mpirun did not end after SIGTERM";
  EXPECT_NE(result->exit_code, 0) << result->err;
  std::cout << "kill -TERM mpirun: exit code " << result->exit_code << ", committed:";
  for (auto epoch : CheckpointDirectory(cwd_ / "D").committed_epochs()) {
    std::cout << " " << epoch;
  }
  std::cout << "\n";
  const auto committed = CheckpointDirectory(cwd_ / "D").committed_epochs();
  ASSERT_FALSE(committed.empty());
  expect_committed_as_uninterrupted(committed);
  expect_resume_finishes_as_uninterrupted();
}

// --time-budget: rank 0 is held in epoch 1 until the budget is spent, so after that epoch the
// next one cannot fit: epoch 1 is committed and the run exits 75 for a requeue.
TEST_F(Preemption, TheTimeBudgetStopsWithACommittedCheckpointAndExit75) {
  constexpr int kBudgetSeconds = 3;
  ChildProcess job(
      job_command({"--time-budget", std::to_string(kBudgetSeconds), "--upload-dir", "U"}),
      cwd_.path(), with_fault("epoch-task@1:0:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused in epoch 1";
  std::this_thread::sleep_for(std::chrono::seconds(kBudgetSeconds));  // spends the budget
  ::kill(*paused, SIGCONT);
  const auto result = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(result.has_value()) << "the job did not end";
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["stop_kind"], "time_limit");
  EXPECT_EQ(summary["stop_reason"].get<std::string>().rfind("time limit: ", 0), 0u)
      << summary["stop_reason"];
  EXPECT_EQ(summary["last_committed_epoch"], 1);
  EXPECT_EQ(summary["exit_code"], 75);
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "model.h5"));
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "U"));
  EXPECT_NE(result->err.find("stopping: time limit: "), std::string::npos) << result->err;
  EXPECT_NE(result->err.find("(--time-budget 3 s)"), std::string::npos) << result->err;
  expect_committed_as_uninterrupted({0, 1});
  expect_resume_finishes_as_uninterrupted();
}

// --checkpoint-every with retention: only every 4th epoch is saved, but a preemption saves the
// epoch it stops after (5); --keep-last 2 then deletes what a gap leaves behind; `latest`
// resumes across the gap and ends bit-identical, its final epoch always saved.
TEST_F(Preemption, CheckpointEveryLeavesGapsThatRetentionAndResumeHandle) {
  const std::vector<std::string> policy = {"--checkpoint-every", "4", "--keep-last", "2"};
  const auto result =
      signal_the_paused_rank(job_command(policy), cwd_.path(), "epoch-task@5:1:STOP", SIGUSR1);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json({0, 4, 5}));
  EXPECT_EQ(summary["deleted_checkpoints"], nlohmann::json({0}));
  EXPECT_EQ(summary["last_committed_epoch"], 5);
  EXPECT_NE(result->err.find("epoch 3 done in"), std::string::npos);
  EXPECT_NE(result->err.find("checkpoint skipped (--checkpoint-every)"), std::string::npos)
      << result->err;
  expect_committed_as_uninterrupted({4, 5});

  auto resumed = run_process(
      job_command({"--resume-from-epoch", "latest", "--checkpoint-every", "4", "--keep-last", "2"}),
      cwd_.path(), kMpiEnvironment);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  expect_committed_as_uninterrupted({5, 6});  // 6: the last epoch, saved whatever the policy
  EXPECT_EQ(read_blob_file(cwd_ / "model.h5"), read_blob_file(reference_dir_->path() / "model.h5"));
}

// --checkpoint-interval alone: epochs are saved by wall time only. A huge interval saves only
// init and the last epoch; rank 0 held in epoch 2 past a short interval makes epoch 2 due.
TEST_F(Preemption, CheckpointIntervalSavesByWallTime) {
  auto sparse =
      run_process(job_command({"--checkpoint-interval", "86400"}), cwd_.path(), kMpiEnvironment);
  ASSERT_EQ(sparse.exit_code, 0) << sparse.err;
  EXPECT_EQ(read_json(cwd_ / "S.json")["committed_checkpoints"], nlohmann::json({0, 6}));
  expect_committed_as_uninterrupted({0, 6});

  ScratchDir other;
  ChildProcess job(job_command({"--checkpoint-interval", "1"}), other.path(),
                   with_fault("epoch-task@2:0:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 0 never paused in epoch 2";
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the interval passes
  ::kill(*paused, SIGCONT);
  const auto result = job.wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(result.has_value()) << "the job did not end";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  const auto committed = CheckpointDirectory(other / "D").committed_epochs();
  for (std::int64_t epoch : {0, 2, 6}) {
    EXPECT_TRUE(std::find(committed.begin(), committed.end(), epoch) != committed.end())
        << "epoch " << epoch << " not committed";
  }
  EXPECT_EQ(read_json(other / "S.json")["committed_checkpoints"], nlohmann::json(committed));
}

// Every run that ends appends its record to D/runs.jsonl; the next run's log and summary show
// the restart count and the history, and `inspect` prints it.
TEST_F(Preemption, EveryRunIsRecordedInTheHistoryThatInspectPrints) {
  const auto preempted =
      signal_the_paused_rank(job_command(), cwd_.path(), "epoch-task@3:1:STOP", SIGUSR1);
  ASSERT_TRUE(preempted.has_value());
  ASSERT_EQ(preempted->exit_code, 75) << preempted->err;
  auto environment = kMpiEnvironment;
  environment["SLURM_RESTART_COUNT"] = "1";  // as SLURM sets it in a requeued job
  const auto resumed =
      run_process(job_command({"--resume-from-epoch", "latest"}), cwd_.path(), environment);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("restart count 1; 1 earlier run(s) in the run history"),
            std::string::npos)
      << resumed.err;

  std::vector<nlohmann::json> records;
  std::istringstream lines(read_file(cwd_ / "D" / "runs.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    records.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(records.size(), 2u);
  const auto& first = records[0];
  EXPECT_TRUE(first["resumed_from"].is_null());
  EXPECT_EQ(first["stop_kind"], "preempted");
  EXPECT_EQ(first["stop_reason"], "preempted (SIGUSR1 on rank 1)");
  EXPECT_EQ(first["epochs_run"], 3);
  EXPECT_EQ(first["last_committed_epoch"], 3);
  EXPECT_EQ(first["exit_code"], 75);
  EXPECT_EQ(first["restart_count"], 0);
  EXPECT_EQ(first["ranks"], 3);
  EXPECT_TRUE(first["slurm_job_id"].is_null());
  EXPECT_FALSE(first["host"].get<std::string>().empty());
  for (const char* key : {"started_at", "ended_at"}) {
    const auto time = first[key].get<std::string>();
    EXPECT_EQ(time.size(), 20u) << time;  // 2026-11-23T12:10:00Z
    EXPECT_EQ(time.back(), 'Z') << time;
  }
  const auto& second = records[1];
  EXPECT_EQ(second["resumed_from"], 3);
  EXPECT_EQ(second["stop_kind"], "stop_condition");
  EXPECT_EQ(second["epochs_run"], 3);
  EXPECT_EQ(second["last_committed_epoch"], 6);
  EXPECT_EQ(second["exit_code"], 0);
  EXPECT_EQ(second["restart_count"], 1);
  const auto summary = read_json(cwd_ / "S.json");
  EXPECT_EQ(summary["restart_count"], 1);
  EXPECT_EQ(summary["history"], nlohmann::json(records));

  const auto text = run_process({EPOCHRUN_BINARY, "inspect", "D"}, cwd_.path());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("run history: 2 run(s)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("exit 75  preempted: preempted (SIGUSR1 on rank 1)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("restart 1  resumed from 3"), std::string::npos) << text.out;
  const auto json = run_process({EPOCHRUN_BINARY, "inspect", "D", "--json"}, cwd_.path());
  EXPECT_EQ(nlohmann::json::parse(json.out)["history"], nlohmann::json(records));
}

}  // namespace
}  // namespace epochrun::testing
