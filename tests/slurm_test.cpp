// slurm/epochrun.sbatch on a real SLURM cluster (tests/clusters/slurm/start-slurm.sh, started by
// the fixture and stopped at the end): sgd_regression on 3 ranks, launched with srun and with
// mpirun, preempted with `scancel --signal=USR1 --full`, `scancel --signal=TERM --full`,
// `scontrol requeue`, and a one-minute `--time` with `--signal=B:USR1@50`; and while a run is
// starting: `scancel --signal=USR1 --full` before the launch, and `--batch` as soon as its ranks
// exist (in the first run and right after the requeue). In every case the job must end
// COMPLETED after its restarts with nobody acting but SLURM and the script (the test only skips
// SLURM's two-minute requeue delay, as tests/clusters/README.md says), no rank ended by a
// signal, its final checkpoint and model bit-identical to an uninterrupted run's, SLURM's
// restart count equal to the runs the history recorded, and no epoch but the one in progress
// computed twice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "launch.hpp"
#include "slurm_job_state.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

using Clock = std::chrono::steady_clock;

const std::filesystem::path kSlurmTools =
    std::filesystem::path(EPOCHRUN_SOURCE_DIR) / "tests" / "clusters" / "slurm";
// Where the cluster keeps its config and daemons' files: always this one, whatever the caller's
// environment says, so that the test talks to the cluster it started and stops only that.
const std::map<std::string, std::string> kSlurmState = {
    {"EPOCHRUN_SLURM_STATE", "/run/epochrun-slurm"}};
const std::filesystem::path kBatchScript =
    std::filesystem::path(EPOCHRUN_SOURCE_DIR) / "slurm" / "epochrun.sbatch";
// A preemption is sent once this epoch has committed: the job is well under way.
constexpr std::int64_t kPreemptAfterEpoch = 3;
// Each case's job, restarts included, ends within this (a hang fails the case, not the suite).
constexpr double kCaseSeconds = 180;
// The time-limit case's: its job needs up to one run per epoch, 8 runs; 154 s under mpirun with
// a load average of about 10 here.
constexpr double kTimeLimitCaseSeconds = 240;

// Whether a rank was ended by a signal in the batch script's output: srun names the signal of a
// task ("task 0: User defined signal 1") where an exit says "task 1: Exited with exit code 75",
// mpirun names a process that "exited on signal", the script a status other than 0 and 75 after
// it passed a signal on. That status alone is no rank's when every one of the `ranks` of that
// run had already stopped by itself (each says "exit code 75"): the signal then met only the
// launcher ending (a time limit's warning, a few seconds after the run's own stop for it).
bool a_rank_ended_by_a_signal(const std::string& output, int ranks) {
  if (std::regex_search(output,
                        std::regex("task [0-9]+: (?!Exited with exit code)|exited on signal"))) {
    return true;
  }
  // One run after another, each from its script's "job N restart K" line.
  const std::regex run_start("epochrun\\.sbatch: job [0-9]+ restart [0-9]+");
  std::vector<std::size_t> starts;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), run_start);
       it != std::sregex_iterator(); ++it) {
    starts.push_back(static_cast<std::size_t>(it->position()));
  }
  starts.push_back(output.size());
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
    const auto run = output.substr(starts[i], starts[i + 1] - starts[i]);
    if (run.find("ended with status") == std::string::npos) {
      continue;
    }
    int stopped = 0;
    for (auto at = run.find("exit code 75: run it again"); at != std::string::npos;
         at = run.find("exit code 75: run it again", at + 1)) {
      ++stopped;
    }
    if (stopped < ranks) {
      return true;
    }
  }
  return false;
}

// The job of a case: sgd_regression with `batches_per_epoch` batches an epoch, `last_epoch`
// epochs.
struct JobSize {
  int batches_per_epoch = 0;
  std::int64_t last_epoch = 0;
};
// 0.2 to 0.4 s an epoch here (3 ranks on 2 cores), 24 epochs: long enough to be preempted in
// the middle, and long against the launchers' start-up, short enough for ten runs. Few, large
// batches: each batch is an MPI_Allreduce, which crawls when 3 ranks share 2 cores.
constexpr JobSize kJob{25, 24};
// The time-limit case's: the same work in 8 epochs. The first epoch of every run generates the
// rank's data too (2 to 5 s here), so the runner's prediction, which takes the longest epoch of
// the run, stops a run of a loaded machine after that one epoch: 24 epochs needed 24 runs of
// about 11 s, more than the case's bound; 8 need 8 at most.
constexpr JobSize kTimeLimitJob{75, 8};

std::vector<std::string> job_options(const JobSize& job) {
  return {"--job",
          "sgd_regression",
          "--sgd_regression.features",
          "512",
          "--sgd_regression.samples",
          "60000",
          "--sgd_regression.batch_size",
          "24576",
          "--sgd_regression.batches_per_epoch",
          std::to_string(job.batches_per_epoch),
          "--sgd_regression.max_epochs",
          std::to_string(job.last_epoch),
          "--sgd_regression.loss_threshold",
          "0",
          "--sgd_regression.model_file",
          "model.h5"};
}

// Runs a command of the cluster's (sbatch, scancel, ...), failing the test when it does not end
// within 60 s.
ProcessResult run_bounded(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::map<std::string, std::string>& environment = {}) {
  return run_within(argv, cwd, 60, environment);
}

// The newest committed epoch of a checkpoint directory (-1: none yet).
std::int64_t newest_epoch(const std::filesystem::path& directory) {
  std::int64_t newest = -1;
  const std::regex name("epoch-([0-9]{6})\\.h5");
  for (const auto& entry : list_directory(directory)) {
    std::smatch match;
    if (std::regex_match(entry, match, name)) {
      newest = std::max<std::int64_t>(newest, std::stoll(match[1]));
    }
  }
  return newest;
}

SlurmJobState job_info(const std::string& id) {
  return parse_slurm_job_state(run_bounded({"scontrol", "-o", "show", "job", id}, "/").out);
}

std::vector<nlohmann::json> read_history(const std::filesystem::path& file) {
  std::vector<nlohmann::json> records;
  std::istringstream lines(read_file(file));
  for (std::string line; std::getline(lines, line);) {
    records.push_back(nlohmann::json::parse(line));
  }
  return records;
}

// A SLURM job id recorded as a string or a number.
std::string id_text(const nlohmann::json& id) {
  return id.is_string() ? id.get<std::string>() : id.dump();
}

// Whether a process of the epochrun binary runs in run `restart` of SLURM job `id` (its
// environment says so; SLURM_RESTART_COUNT is unset in the first run): a rank has been started
// and may not have installed its signal handlers yet.
bool ranks_started(const std::string& id, int restart) {
  const auto binary = std::filesystem::canonical(EPOCHRUN_BINARY);
  const std::string job = std::string("SLURM_JOB_ID=") + id + '\0';
  const std::string count = "SLURM_RESTART_COUNT=";
  for (const auto& entry : list_directory("/proc")) {
    std::error_code error;
    if (entry.empty() || !std::isdigit(static_cast<unsigned char>(entry[0])) ||
        std::filesystem::read_symlink(std::filesystem::path("/proc") / entry / "exe", error) !=
            binary) {
      continue;
    }
    const std::string environment =
        '\0' + read_file(std::filesystem::path("/proc") / entry / "environ");
    const bool in_run =
        environment.find('\0' + count + std::to_string(restart) + '\0') != std::string::npos ||
        (restart == 0 && environment.find('\0' + count) == std::string::npos);
    if (environment.find('\0' + job) != std::string::npos && in_run) {
      return true;
    }
  }
  return false;
}

enum class Launcher { kSrun, kMpirun };
enum class Preemption {
  kUsr1Full,
  kTermFull,
  kRequeue,
  kTimeLimit,
  kUsr1AtStart,
  kUsr1AsRanksStart
};

// "Srun_ScancelUsr1Full": the test's name and the job's (-J), hence its run directory.
std::string case_name(const std::tuple<Launcher, Preemption>& param) {
  const std::map<Preemption, std::string> preemptions = {
      {Preemption::kUsr1Full, "ScancelUsr1Full"},
      {Preemption::kTermFull, "ScancelTermFull"},
      {Preemption::kRequeue, "ScontrolRequeue"},
      {Preemption::kTimeLimit, "TimeLimitWithWarningSignal"},
      {Preemption::kUsr1AtStart, "ScancelUsr1FullAtStart"},
      {Preemption::kUsr1AsRanksStart, "ScancelUsr1BatchAsRanksStart"}};
  return std::string(std::get<0>(param) == Launcher::kSrun ? "Srun_" : "Mpirun_") +
         preemptions.at(std::get<1>(param));
}

class SlurmCluster : public ::testing::TestWithParam<std::tuple<Launcher, Preemption>> {
 protected:
  static void SetUpTestSuite() {
    // Its daemons run as root (SlurmUser=root): that alone this machine must allow.
    if (::geteuid() != 0) {
      unavailable_ = "the SLURM test cluster runs its daemons as root, and this runs as uid " +
                     std::to_string(::geteuid());
      return;
    }
    // About a second, 10 s when it installs SLURM first.
    ChildProcess start({(kSlurmTools / "start-slurm.sh").string()}, "/", kSlurmState);
    const auto started = start.wait(300);
    ASSERT_TRUE(started.has_value()) << "start-slurm.sh did not end within 300 s";
    cluster_up_ = started->exit_code == 0;
    ASSERT_TRUE(cluster_up_) << started->out << started->err;
    // sbatch, scontrol, scancel and the batch script's srun find the cluster by it (the machine's
    // /etc/slurm is not touched).
    ::setenv("SLURM_CONF", (kSlurmState.at("EPOCHRUN_SLURM_STATE") + "/slurm.conf").c_str(), 1);
  }
  static void TearDownTestSuite() {
    if (unavailable_.empty()) {
      ChildProcess stop({(kSlurmTools / "stop-slurm.sh").string()}, "/", kSlurmState);
      EXPECT_TRUE(stop.wait(120).has_value()) << "stop-slurm.sh did not end within 120 s";
    }
    references_.clear();
  }
  void SetUp() override {
    if (!unavailable_.empty()) {
      GTEST_SKIP() << unavailable_;
    }
    ASSERT_TRUE(cluster_up_) << "start-slurm.sh failed";
  }

  // The uninterrupted run of `job` (mpiexec, 3 ranks), run once per job size; nullptr (and a
  // failure) when it failed.
  static const ScratchDir* reference(const JobSize& job, double* seconds) {
    auto& made = references_[job.batches_per_epoch];
    if (!made.directory) {
      made.directory = std::make_unique<ScratchDir>();
      auto args = job_options(job);
      args.insert(args.begin(), "run");
      args.insert(args.end(), {"--checkpoint-dir", "D", "--log-level", "warn"});
      const auto started = Clock::now();
      ChildProcess run(epochrun_on_ranks(3, args), made.directory->path(), kMpiEnvironment);
      const auto result = run.wait(kCaseSeconds);
      made.seconds = std::chrono::duration<double>(Clock::now() - started).count();
      made.ok = result.has_value() && result->exit_code == 0;
      EXPECT_TRUE(made.ok) << "the uninterrupted run failed or did not end: "
                           << (result ? result->err : "");
    }
    *seconds = made.seconds;
    return made.ok ? made.directory.get() : nullptr;
  }

  // Submits the batch script, preempts the job once it is under way, lets it run to its end
  // (skipping only SLURM's requeue delay), and checks the outcome against the uninterrupted run.
  void preempt_and_finish(Launcher launcher, Preemption preemption) {
    const std::string name = case_name(GetParam());
    std::vector<std::string> sbatch = {"sbatch",     "--parsable",         "--overcommit",
                                       "--ntasks=3", "--job-name=" + name, "--output=job.out"};
    const auto& job = preemption == Preemption::kTimeLimit ? kTimeLimitJob : kJob;
    const auto last_epoch = job.last_epoch;
    double reference_seconds = 0;
    const auto* reference_run = reference(job, &reference_seconds);
    ASSERT_NE(reference_run, nullptr);
    auto options = job_options(job);
    if (preemption == Preemption::kTimeLimit) {
      // The warning comes at one of slurmctld's 30-s checks, anywhere in the first minute. The
      // runner's own prediction stops a run once the next epoch would not end --time-margin
      // before the end: a margin that leaves each run about half of what the uninterrupted run
      // took makes sure the limit stops the job at least once, however fast or loaded the
      // machine is (a fixed margin either let a fast run finish or stopped a slow one after
      // every epoch).
      sbatch.insert(sbatch.end(), {"--time=00:01:00", "--signal=B:USR1@50"});
      const double margin = std::clamp(59 - reference_seconds / 2, 30.0, 59.0);
      options.insert(options.end(), {"--time-margin", std::to_string(margin)});
    }
    sbatch.push_back(kBatchScript.string());
    sbatch.insert(sbatch.end(), options.begin(), options.end());
    auto environment = kMpiEnvironment;
    // Ranks started by SLURM do not know they share cores: without this they spin in MPI calls
    // and starve each other.
    environment["OMPI_MCA_mpi_yield_when_idle"] = "1";
    environment["EPOCHRUN"] = EPOCHRUN_BINARY;
    environment["EPOCHRUN_LAUNCHER"] = launcher == Launcher::kSrun ? "srun" : "mpirun";
    auto submitted = run_bounded(sbatch, cwd_.path(), environment);
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    job_id_ = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
    const auto run_dir = cwd_ / ("epochrun-runs/sgd_regression-" + name);
    const auto checkpoints = run_dir / "checkpoints";

    const auto deadline =
        Clock::now() + std::chrono::duration<double>(preemption == Preemption::kTimeLimit
                                                         ? kTimeLimitCaseSeconds
                                                         : kCaseSeconds);
    auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
    // The newest committed epoch when the (first) preemption was sent: at most the next one may
    // be computed twice.
    std::int64_t committed_at_preemption = -1;
    // The cases that signal a run while it starts send this to the batch shell.
    const std::vector<std::string> usr1_batch = {"scancel", "--signal=USR1", "--batch", job_id_};
    // Sends it as soon as a rank of run `restart` exists: the ranks are still starting (loading
    // their libraries, in MPI_Init) and, before the fix, had no handler yet.
    const auto signal_as_ranks_start = [&](int restart) {
      while (!ranks_started(job_id_, restart) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_LT(Clock::now(), deadline) << "no rank of run " << restart << " started";
      const auto sent = run_bounded(usr1_batch, "/");
      EXPECT_EQ(sent.exit_code, 0) << sent.err;
    };
    if (preemption == Preemption::kUsr1AtStart) {
      // As soon as the script has set its traps and is about to launch the ranks (its first
      // line).
      while (read_file(cwd_ / "job.out").find("epochrun.sbatch: job") == std::string::npos &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      committed_at_preemption = newest_epoch(checkpoints);
    } else if (preemption == Preemption::kUsr1AsRanksStart) {
      signal_as_ranks_start(0);
      committed_at_preemption = newest_epoch(checkpoints);
    } else if (preemption != Preemption::kTimeLimit) {
      while (newest_epoch(checkpoints) < kPreemptAfterEpoch && Clock::now() < deadline) {
        ASSERT_NE(job_info(job_id_).state, "COMPLETED") << "finished before it was preempted";
        pause();
      }
      committed_at_preemption = newest_epoch(checkpoints);
      ASSERT_GE(committed_at_preemption, kPreemptAfterEpoch) << "never got under way";
    }
    if (preemption != Preemption::kTimeLimit && preemption != Preemption::kUsr1AsRanksStart) {
      const std::map<Preemption, std::vector<std::string>> commands = {
          {Preemption::kUsr1Full, {"scancel", "--signal=USR1", "--full", job_id_}},
          {Preemption::kUsr1AtStart, {"scancel", "--signal=USR1", "--full", job_id_}},
          {Preemption::kTermFull, {"scancel", "--signal=TERM", "--full", job_id_}},
          {Preemption::kRequeue, {"scontrol", "requeue", job_id_}}};
      auto sent = run_bounded(commands.at(preemption), cwd_.path());
      ASSERT_EQ(sent.exit_code, 0) << sent.err;
    }

    // Until the job ends: once it has been PENDING (requeued) for 2 s and its previous run has
    // ended, let it start now instead of in two minutes.
    SlurmJobState info;
    bool pending = false;
    bool signalled_after_requeue = false;
    int early_warnings = 0;
    Clock::time_point pending_since;
    while (Clock::now() < deadline) {
      info = job_info(job_id_);
      // No state: scontrol got no answer this time (slurmctld busy); ask again.
      if (info.state.empty()) {
        pause();
        continue;
      }
      if (preemption == Preemption::kTimeLimit && early_warnings < 2 &&
          killed_by_an_early_warning(info, read_file(cwd_ / "job.out"))) {
        ++early_warnings;
        const auto requeued = run_bounded({"scontrol", "requeue", job_id_}, "/");
        ASSERT_EQ(requeued.exit_code, 0) << requeued.err;
        pause();
        continue;
      }
      // SIGNALING: SLURM delivers a signal before a requeue or an end (seen while the machine
      // was loaded): not an end either.
      if (info.state != "PENDING" && info.state != "RUNNING" && info.state != "COMPLETING" &&
          info.state != "REQUEUED" && info.state != "CONFIGURING" && info.state != "SIGNALING") {
        break;
      }
      if (info.state == "PENDING" && info.restarts > 0) {
        if (!pending) {
          pending = true;
          pending_since = Clock::now();
        } else if (Clock::now() - pending_since >= std::chrono::seconds(2) &&
                   info.reason == "BeginTime" && !has_slurm_step_processes(job_id_)) {
          run_bounded({"scontrol", "update", "JobId=" + job_id_, "StartTime=now"}, "/");
          pending = false;
          // And again right after the requeue, as the next run's ranks start.
          if (preemption == Preemption::kUsr1AsRanksStart && !signalled_after_requeue) {
            signalled_after_requeue = true;
            signal_as_ranks_start(1);
          }
        }
      } else {
        pending = false;
      }
      pause();
    }
    const std::string output = read_file(cwd_ / "job.out");
    ASSERT_EQ(info.state, "COMPLETED") << "job " << job_id_ << " (" << info.reason << ")\n"
                                       << output;
    // Every signal stopped a run, also one that came while the run was starting: one requeue
    // for each signal sent then.
    if (preemption == Preemption::kUsr1AtStart) {
      EXPECT_EQ(info.restarts, 1) << output;
    } else if (preemption == Preemption::kUsr1AsRanksStart) {
      EXPECT_EQ(info.restarts, 2) << output;
    } else {
      EXPECT_GE(info.restarts - early_warnings, 1) << output;
    }
    // No rank ended by a signal. Only where SLURM itself ends the job (scontrol requeue) may its
    // SIGTERM end Open MPI's daemons and, through them, the ranks.
    if (preemption != Preemption::kRequeue) {
      EXPECT_FALSE(a_rank_ended_by_a_signal(output, 3)) << "a rank was ended by a signal:\n"
                                                        << output;
    }

    // Bit-identical to the uninterrupted run: the final checkpoint and the model.
    EXPECT_EQ(newest_epoch(checkpoints), last_epoch) << output;
    EXPECT_EQ(read_checkpoint_contents(CheckpointDirectory(checkpoints).file_for(last_epoch)),
              read_checkpoint_contents(
                  CheckpointDirectory(reference_run->path() / "D").file_for(last_epoch)));
    EXPECT_EQ(read_blob_file(run_dir / "model.h5"),
              read_blob_file(reference_run->path() / "model.h5"));

    // The last run finished the job and knows how often SLURM restarted it.
    const auto summary = nlohmann::json::parse(read_file(run_dir / "summary.json"));
    EXPECT_EQ(summary["exit_code"], 0);
    // sgd_regression ends at max_epochs through a stop condition of its own.
    EXPECT_EQ(summary["stop_kind"], "stop_condition");
    EXPECT_EQ(summary["restart_count"], info.restarts);
    EXPECT_EQ(id_text(summary["slurm_job_id"]), job_id_);

    // The history: a preempted run recorded its stop and exit code 75, and the next one resumed
    // from exactly its last checkpoint. Only a run that SLURM ended (Open MPI's orted kills its
    // ranks within a second of SLURM's SIGTERM) left no record; the next one then resumed from
    // the newest epoch committed before.
    const auto history = read_history(checkpoints / "runs.jsonl");
    ASSERT_FALSE(history.empty()) << output;
    const auto& last = history.back();
    EXPECT_EQ(last["exit_code"], 0);
    EXPECT_EQ(last["restart_count"], info.restarts);
    std::int64_t epochs_run = 0;
    for (std::size_t i = 0; i < history.size(); ++i) {
      const auto& record = history[i];
      epochs_run += record["epochs_run"].get<std::int64_t>();
      if (i + 1 < history.size()) {
        EXPECT_EQ(record["exit_code"], 75) << record.dump();
        EXPECT_TRUE(record["stop_kind"] == "preempted" || record["stop_kind"] == "time_limit")
            << record.dump();
        EXPECT_EQ(history[i + 1]["resumed_from"], record["last_committed_epoch"]) << output;
      }
    }
    // A run killed by an early warning ran nothing, so recorded nothing.
    const int runs = info.restarts + 1 - early_warnings;
    if (static_cast<int>(history.size()) == runs) {
      EXPECT_TRUE(history.front()["resumed_from"].is_null());
      EXPECT_EQ(epochs_run, last_epoch) << "an epoch was computed twice:\n" << output;
      if (committed_at_preemption >= 0) {
        // The epoch in progress when the signal came was finished and committed.
        EXPECT_GT(history.front()["last_committed_epoch"].get<std::int64_t>(),
                  committed_at_preemption);
      }
    } else {
      EXPECT_TRUE(launcher == Launcher::kMpirun && preemption == Preemption::kRequeue)
          << history.size() << " runs recorded, " << info.restarts << " restarts\n"
          << output;
      EXPECT_EQ(static_cast<int>(history.size()), runs - 1);
      const auto& resumed_from = history.front()["resumed_from"];
      EXPECT_GE(resumed_from.is_null() ? -1 : resumed_from.get<std::int64_t>(),
                committed_at_preemption);
    }
  }

  void TearDown() override {
    if (!job_id_.empty()) {
      run_bounded({"scancel", job_id_}, "/");
    }
  }

  // Why this machine cannot have the cluster (every case then skips saying so); empty when it can.
  static inline std::string unavailable_;
  static inline bool cluster_up_ = false;
  // The uninterrupted runs by batches per epoch, and how long each took here and now (the
  // machine's pace).
  struct Reference {
    std::unique_ptr<ScratchDir> directory;
    double seconds = 0;
    bool ok = false;
  };
  static inline std::map<int, Reference> references_;
  ScratchDir cwd_;
  std::string job_id_;
};

TEST_P(SlurmCluster, JobEndsCompletedAndIdentical) {
  preempt_and_finish(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    EveryLauncherAndPreemption, SlurmCluster,
    ::testing::Combine(::testing::Values(Launcher::kSrun, Launcher::kMpirun),
                       ::testing::Values(Preemption::kUsr1Full, Preemption::kTermFull,
                                         Preemption::kRequeue, Preemption::kTimeLimit)),
    [](const auto& test) { return case_name(test.param); });

// A signal while a run starts (docs/PREEMPTION.md, "A signal while the ranks start"): before
// the launch, and as soon as the ranks exist, before they could catch it. It must stop that run
// as soon as the ranks can act on it, like any preemption.
INSTANTIATE_TEST_SUITE_P(SignalDuringStartUp, SlurmCluster,
                         ::testing::Combine(::testing::Values(Launcher::kSrun, Launcher::kMpirun),
                                            ::testing::Values(Preemption::kUsr1AtStart,
                                                              Preemption::kUsr1AsRanksStart)),
                         [](const auto& test) { return case_name(test.param); });

}  // namespace
}  // namespace epochrun::testing
