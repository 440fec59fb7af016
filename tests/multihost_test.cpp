// epochrun across hosts: the harness of tests/clusters (README there) turns this machine
// into three hosts (network namespaces with their own hostname, IP, /dev/shm and /local) that
// share a real GlusterFS volume at /shared, each through its own FUSE client. The test starts
// it, runs epochrun with Open MPI over TCP between the hosts (host-exec as the rsh agent, the
// checkpoint directory on /shared), and stops it at the end, also when the test fails or is
// killed. Every job, synchronous and asynchronous, must end as the same run on one host ends,
// bit for bit; one host's ranks killed mid-epoch or mid-save, or its network cut mid-save, must
// lose no committed epoch, end within a bound, and resume on another placement of the ranks over
// the hosts bit-identical to an uninterrupted run. With --local-dir on each host's /local, a
// resume loads the node-local copies on the same placement and the shared file on another.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "launch.hpp"
#include "multihost_harness.hpp"
#include "slurm_job_state.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

using Clock = std::chrono::steady_clock;

// What a run leaves that must be bit-identical between runs: every committed epoch's contents,
// and the job's own output file (none: empty name): an HDF5 file's datasets (its bytes hold
// times), another file's bytes.
struct RunResults {
  std::map<std::int64_t, CheckpointContents> epochs;
  std::map<std::string, Blob> output;
  double seconds = 0;  // how long the run took (only for the single-host runs)
};

RunResults results_of(const std::filesystem::path& directory, const std::string& output_file) {
  RunResults results;
  for (auto epoch : CheckpointDirectory(directory / "ck").committed_epochs()) {
    results.epochs[epoch] = everything_in(CheckpointDirectory(directory / "ck").file_for(epoch));
  }
  if (output_file.size() > 3 && output_file.substr(output_file.size() - 3) == ".h5") {
    results.output = read_blob_file(directory / output_file);
  } else if (!output_file.empty()) {
    const auto text = read_file(directory / output_file);
    results.output[output_file] =
        Blob::bytes(std::as_bytes(std::span<const char>(text.data(), text.size())));
  }
  return results;
}

struct JobCase {
  std::string name;
  std::vector<std::string> options;
  std::string output_file;
};

const std::vector<JobCase>& job_cases() {
  static const std::vector<JobCase> kCases = {
      {"sum_pipeline", {"--job", "sum_pipeline", "--log-level", "warn"}, ""},
      {"sgd_regression", small_sgd_regression_options(8), "model.h5"},
      {"heat_diffusion",
       {"--job", "heat_diffusion", "--log-level", "warn", "--heat_diffusion.rows", "64",
        "--heat_diffusion.columns", "128", "--heat_diffusion.max_epochs", "8",
        "--heat_diffusion.tolerance", "0", "--heat_diffusion.output_file", "heat_summary.json"},
       "heat_summary.json"}};
  return kCases;
}

std::vector<std::string> run_args(const std::vector<std::string>& options,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"run", "--checkpoint-dir", "ck"};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<int> ranks_on_host(const std::string& host) {
  return processes_on_host(host, EPOCHRUN_BINARY);
}

// The first rank on `host` that is stopped (an EPOCHRUN_FAULT ...:STOP), waiting at most 60 s.
std::optional<int> wait_for_a_stopped_rank(const std::string& host) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    for (int pid : ranks_on_host(host)) {
      const auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
      const auto state = stat.find(") ");
      if (state != std::string::npos && stat[state + 2] == 'T') {
        return pid;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// The pid the harness recorded for its process `name` ("glusterfsd", "glusterfs@host2", ...
// in /run/multihost/pids: name, pid, start time), if any.
std::optional<int> recorded_pid(const std::string& name) {
  std::optional<int> found;
  std::ifstream pids("/run/multihost/pids");
  for (std::string recorded, start; pids >> recorded;) {
    int pid = 0;
    pids >> pid >> start;
    if (recorded == name) {
      found = pid;
    }
  }
  return found;
}

class Multihost : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Harness::unavailable_.empty()) {
      GTEST_SKIP() << Harness::unavailable_;
    }
    ASSERT_TRUE(Harness::up_) << "start-hosts.sh failed";
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(test->test_suite_name()) + "-" + test->name();
    std::replace(name.begin(), name.end(), '/', '-');
    shared_ = kSharedBase / name;
    const auto made = on_host(
        "host1", "rm -rf '" + shared_.string() + "' && mkdir -p '" + shared_.string() + "'");
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  // Whatever a failed case left running on the hosts (a SIGKILLed mpirun cannot end the ranks
  // it started over host-exec).
  void TearDown() override {
    for (const auto& host : kHosts) {
      for (int pid : ranks_on_host(host)) {
        ::kill(pid, SIGKILL);
      }
    }
  }

  // The run's directory on the volume copied here (by host3, through its own client), so that
  // this process, which has no /shared, reads what a host reads.
  std::filesystem::path fetch(const std::string& name) {
    const auto local = local_ / name;
    const auto copied =
        on_host("host3", "cp -a '" + shared_.string() + "' '" + local.string() + "'");
    EXPECT_EQ(copied.exit_code, 0) << copied.err;
    return local;
  }

  // `epochrun inspect --verify` of the run's checkpoints, on host2.
  void expect_verified() {
    const auto verified = on_host("host2", std::string(EPOCHRUN_BINARY) + " inspect '" +
                                               (shared_ / "ck").string() + "' --verify");
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
    EXPECT_EQ(verified.out.find("CORRUPT"), std::string::npos) << verified.out;
  }

  // The same job on one host (this machine, `ranks` ranks through mpiexec), run once per job
  // options and rank count.
  static const RunResults& single_host_run(const JobCase& job, int ranks) {
    static std::map<std::pair<std::vector<std::string>, int>, RunResults> runs;
    const auto key = std::pair(job.options, ranks);
    if (runs.count(key) == 0) {
      ScratchDir directory;
      const auto started = Clock::now();
      const auto result = run_within(epochrun_on_ranks(ranks, run_args(job.options)),
                                     directory.path(), kJobEndsWithinSeconds);
      EXPECT_EQ(result.exit_code, 0) << result.err;
      runs[key] = results_of(directory.path(), job.output_file);
      runs[key].seconds = std::chrono::duration<double>(Clock::now() - started).count();
    }
    return runs.at(key);
  }

  std::filesystem::path shared_;
  ScratchDir local_;
};

// Every job, synchronous and asynchronous, on 3 hosts ends as it ends on one host.
class MultihostJobs : public Multihost,
                      public ::testing::WithParamInterface<std::tuple<std::size_t, bool>> {};

TEST_P(MultihostJobs, RunsToTheEndAsOnOneHost) {
  const auto& job = job_cases().at(std::get<0>(GetParam()));
  const bool async = std::get<1>(GetParam());
  std::vector<std::string> extra;
  if (async) {
    extra.push_back("--async-checkpoint");
  }
  const auto result =
      run_within(epochrun_on_hosts("host1,host2,host3", 3, shared_, run_args(job.options, extra)),
                 "/", kJobEndsWithinSeconds, launcher_environment());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  expect_verified();
  const auto across_hosts = results_of(fetch("run"), job.output_file);
  const auto& on_one_host = single_host_run(job, 3);
  ASSERT_FALSE(on_one_host.epochs.empty());
  EXPECT_EQ(across_hosts.epochs.size(), on_one_host.epochs.size());
  for (const auto& [epoch, contents] : on_one_host.epochs) {
    EXPECT_TRUE(across_hosts.epochs.count(epoch) == 1 && across_hosts.epochs.at(epoch) == contents)
        << "epoch " << epoch << " differs from the single-host run's";
  }
  EXPECT_TRUE(across_hosts.output == on_one_host.output)
      << job.output_file << " differs from the single-host run's";
}

INSTANTIATE_TEST_SUITE_P(EveryJob, MultihostJobs,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Bool()),
                         [](const auto& test) {
                           return job_cases().at(std::get<0>(test.param)).name +
                                  (std::get<1>(test.param) ? "_Async" : "_Sync");
                         });

// --local-dir on each host's own /local, the checkpoints on /shared, sgd_regression on 3 hosts:
// stopped after epoch 4; resumed on another placement up to epoch 6, which loads the shared file
// (no rank finds its copy on its new host); resumed again on that placement to the end, which
// loads every rank's node-local copy of epoch 6 (the log says which). Every committed
// checkpoint verifies on another host, and the job ends bit-identical to the same job on one
// host.
TEST_F(Multihost, LocalStagingResumesExactlyFromTheNodeLocalCopiesOrTheSharedFile) {
  const JobCase job = {"sgd_regression", small_sgd_regression_options(8), "model.h5"};
  const std::string local = "/local/epochrun-multihost-test-local-staging";
  for (const auto& host : kHosts) {
    const auto made = on_host(host, "rm -rf '" + local + "' && mkdir -p '" + local + "'");
    ASSERT_EQ(made.exit_code, 0) << host << ": " << made.err;
  }
  auto options = job.options;
  const auto level = std::find(options.begin(), options.end(), "--log-level");
  options.erase(level, level + 2);
  const auto run = [&](const std::string& hosts, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--local-dir", local, "--log-level", "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto result = run_within(epochrun_on_hosts(hosts, 3, shared_, run_args(options, args)),
                                   "/", kJobEndsWithinSeconds, launcher_environment());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    return result.out + result.err;
  };
  run("host1,host2,host3", {"--num-epochs", "4"});
  const auto elsewhere =
      run("host2,host3,host1", {"--resume-from-epoch", "latest", "--num-epochs", "6"});
  EXPECT_NE(elsewhere.find("not loading the node-local copies in " + local), std::string::npos)
      << elsewhere;
  EXPECT_NE(elsewhere.find("from epoch 4 (ck/epoch-000004.h5)"), std::string::npos) << elsewhere;
  const auto same_hosts = run("host2,host3,host1", {"--resume-from-epoch", "latest"});
  EXPECT_NE(same_hosts.find("from epoch 6 (the node-local copies in " + local), std::string::npos)
      << same_hosts;
  expect_verified();
  const auto across_hosts = results_of(fetch("run"), job.output_file);
  const auto& on_one_host = single_host_run(job, 3);
  EXPECT_TRUE(across_hosts.epochs == on_one_host.epochs)
      << "the committed epochs differ from the single-host run's";
  EXPECT_TRUE(across_hosts.output == on_one_host.output)
      << job.output_file << " differs from the single-host run's";
  for (const auto& host : kHosts) {
    on_host(host, "rm -rf '" + local + "'");
  }
}

// --flush-every 5 with each host's own /local and no redundancy: heat_diffusion on 3 hosts,
// host2's rank SIGKILLed after epoch 7 ran (epochs 0 and 5 flushed, 1 to 4 and 6 node-local)
// and host2's node-local directory wiped (created anew by the restart): the restart on the same
// hosts cannot recover node-local epoch 6, says so and what it costs, resumes from flushed epoch
// 5, and every flushed epoch and the output are the same job's on one host.
TEST_F(Multihost, ALostHostsNodeLocalEpochsFallBackToTheNewestFlushedEpoch) {
  const auto& job = job_cases().at(2);
  const std::string local = "/local/epochrun-multihost-test-levels";
  for (const auto& host : kHosts) {
    on_host(host, "rm -rf '" + local + "'");
  }
  const auto args = run_args(job.options, {"--local-dir", local, "--flush-every", "5"});
  const auto killed =
      run_within(epochrun_on_hosts("host1,host2,host3", 3, shared_, args, true), "/",
                 kJobEndsWithinSeconds, launcher_environment("epoch@7:1:KILL"));
  EXPECT_NE(killed.exit_code, 0) << killed.out << killed.err;
  const auto wiped = on_host("host2", "test -d '" + local + "' && rm -rf '" + local + "'");
  ASSERT_EQ(wiped.exit_code, 0) << "host2 had no node-local copies: " << wiped.err;
  auto resume = args;
  resume.insert(resume.end(), {"--resume-from-epoch", "latest"});
  const auto resumed = run_within(epochrun_on_hosts("host1,host2,host3", 3, shared_, resume), "/",
                                  kJobEndsWithinSeconds, launcher_environment());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("epoch 6 not recoverable: rank 1: the node-local copy written on host2"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("resuming from flushed epoch 5, 1 epoch lost"), std::string::npos) << all;
  expect_verified();
  const auto across_hosts = results_of(fetch("run"), job.output_file);
  const auto& on_one_host = single_host_run(job, 3);
  EXPECT_EQ(CheckpointDirectory(local_ / "run" / "ck").committed_epochs(),
            (std::vector<std::int64_t>{0, 5, 8}));
  for (const auto& [epoch, contents] : across_hosts.epochs) {
    EXPECT_TRUE(on_one_host.epochs.count(epoch) == 1 && on_one_host.epochs.at(epoch) == contents)
        << "epoch " << epoch << " differs from the single-host run's";
  }
  EXPECT_TRUE(across_hosts.output == on_one_host.output)
      << job.output_file << " differs from the single-host run's";
  for (const auto& host : kHosts) {
    on_host(host, "rm -rf '" + local + "'");
  }
}

// heat_diffusion (every rank writes its rows and their checksum) with rank 0 on host3, then at
// once `inspect --verify` on host3 and a resume on the same placement. Rank 0's host read parts
// of each file back while laying it out, before the other ranks wrote there; without the
// commit's drop of those pages, host3 served them for about a second more: the newest epoch
// failed its checksum there ("stored xxh64 0"), and the resume skipped it as corrupt and went
// back an epoch.
TEST_F(Multihost, RightAfterTheRunRankZerosHostReadsTheNewestEpochAsWritten) {
  const auto& job = job_cases().at(2);
  const std::string placement = "host3,host1,host2:2";
  const auto run = [&](const std::vector<std::string>& extra) {
    auto options = job.options;
    const auto level = std::find(options.begin(), options.end(), "--log-level");
    options.erase(level, level + 2);
    std::vector<std::string> args = {"--log-level", "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto result =
        run_within(epochrun_on_hosts(placement, 4, shared_, run_args(options, args)), "/",
                   kJobEndsWithinSeconds, launcher_environment());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    return result.out + result.err;
  };
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const auto epochs = std::to_string(2 * round);
    run(round == 1
            ? std::vector<std::string>{"--num-epochs", epochs}
            : std::vector<std::string>{"--resume-from-epoch", "latest", "--num-epochs", epochs});
    const auto verified = on_host("host3", std::string(EPOCHRUN_BINARY) + " inspect '" +
                                               (shared_ / "ck").string() + "' --verify");
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
    EXPECT_NE(verified.out.find("found: nothing wrong"), std::string::npos) << verified.out;
  }
  const auto resumed = run({"--resume-from-epoch", "latest"});
  EXPECT_NE(resumed.find("from epoch 6 (ck/epoch-000006.h5)"), std::string::npos) << resumed;
  EXPECT_EQ(resumed.find("skipping"), std::string::npos) << resumed;
}

// A checkpoint directory on each host's own disk (/local: a different directory on every host)
// is refused before the first epoch, with one line that names the ranks not seeing rank 0's
// file, and exit 3; no epoch runs and nothing is committed (before, every save failed and the
// run ended 0 with nothing committed).
TEST_F(Multihost, ANodeLocalCheckpointDirectoryIsRefusedBeforeTheFirstEpoch) {
  const std::string local = "/local/epochrun-multihost-test-not-shared";
  for (const auto& host : kHosts) {
    const auto made = on_host(host, "rm -rf '" + local + "' && mkdir -p '" + local + "'");
    ASSERT_EQ(made.exit_code, 0) << host << ": " << made.err;
  }
  std::vector<std::string> args = {"run", "--checkpoint-dir", local};
  const auto options = small_sgd_regression_options(8);
  args.insert(args.end(), options.begin(), options.end());
  const auto result = run_within(epochrun_on_hosts("host1,host2,host3", 3, shared_, args), "/",
                                 kJobEndsWithinSeconds, launcher_environment());
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;
  const std::regex refusal("checkpoint directory " + local +
                           " is not the same directory on every rank: the file rank 0 wrote "
                           "there is not seen by rank 1 on host2: .*; rank 2 on host3: ");
  EXPECT_TRUE(std::regex_search(result.err, refusal)) << result.err;
  for (const auto& host : kHosts) {
    // The lock file stays (src/platform/directory_lock.hpp); nothing else may.
    const auto listed = on_host(host, "ls -A '" + local + "' | grep -vx .epochrun.lock || true");
    EXPECT_EQ(listed.out, "") << "left on " << host << ": " << listed.out;
    on_host(host, "rm -rf '" + local + "'");
  }
}

// tests/lock_race_across_hosts.sh, under the volume's default options and with
// performance.open-behind off: a process
// unlinks the lock file while holding it just as run B on another host has opened it, and run C
// starts on a third host while B runs. B must take the directory and end 0, C must be refused
// with exit 3 (before: B was refused with ESTALE under the defaults, and with open-behind off B
// and C ran in one directory at once).
TEST_F(Multihost, TheLockRaceExampleEndsWithTheFirstRunGoingOnAndTheSecondRefused) {
  const auto gluster = [](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"nsenter",
                                     "--net=/run/netns/storage",
                                     "--mount=/run/multihost/ns/storage.mnt",
                                     "--",
                                     "gluster",
                                     "--mode=script"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_harness(argv);
  };
  auto environment = kHarnessEnvironment;
  environment["EPOCHRUN"] = EPOCHRUN_BINARY;
  const auto race = [&](const std::string& name) {
    const auto raced = run_within(
        {(std::filesystem::path(EPOCHRUN_SOURCE_DIR) / "tests/lock_race_across_hosts.sh").string(),
         kHarness.string(), (shared_ / name).string()},
        "/", 300, environment);
    EXPECT_EQ(raced.exit_code, 0) << raced.out << raced.err;
    EXPECT_NE(raced.out.find("C exit 3"), std::string::npos) << raced.out << raced.err;
    EXPECT_NE(raced.out.find("B exit 0"), std::string::npos) << raced.out << raced.err;
  };
  {
    SCOPED_TRACE("default volume options");
    race("defaults");
  }
  const auto set = gluster({"volume", "set", "mhvol", "performance.open-behind", "off"});
  ASSERT_EQ(set.exit_code, 0) << set.out << set.err;
  const auto got = gluster({"volume", "get", "mhvol", "performance.open-behind"});
  ASSERT_TRUE(std::regex_search(got.out, std::regex("performance.open-behind +off")))
      << got.out << got.err;
  {
    SCOPED_TRACE("performance.open-behind off");
    race("open-behind-off");
  }
  const auto reset = gluster({"volume", "reset", "mhvol", "performance.open-behind"});
  EXPECT_EQ(reset.exit_code, 0) << reset.out << reset.err;
}

// The kill cases: sgd_regression on 4 ranks, rank 0 on host1, ranks 1 and 2 on host2, rank 3 on
// host3; resumed on another placement, rank 0 on host3 (ranks 0 and 1 are where ranks 3 and 0
// were, 2 and 3 on host2).
const JobCase kKilledJob = {"sgd_regression", small_sgd_regression_options(8), "model.h5"};
constexpr int kKilledRanks = 4;
const std::string kPlacement = "host1,host2:2,host3";
const std::string kOtherPlacement = "host3,host1,host2:2";
// The epoch whose run or save the faults interrupt.
constexpr std::int64_t kInterruptedEpoch = 3;
// With a host cut off, the other hosts' ranks end after --save-timeout; this one, so that the
// test takes seconds. The ranks' own bound for a stuck peer; the test's bounds are wider.
constexpr int kSaveTimeoutSeconds = 10;

class MultihostFaults : public Multihost {
 protected:
  // The job the faults interrupt: kKilledJob unless a case needs every host to write.
  const JobCase* job_ = &kKilledJob;

  // The job on kPlacement with `fault`, the rank it names paused at it on `host` (rank 0 is on
  // host1, 1 and 2 on host2): nullopt (and a test failure) when it never paused there.
  std::optional<int> start_paused(std::unique_ptr<ChildProcess>& job, const std::string& fault,
                                  const std::string& host = "host2") {
    job = std::make_unique<ChildProcess>(
        epochrun_on_hosts(
            kPlacement, kKilledRanks, shared_,
            run_args(job_->options, {"--save-timeout", std::to_string(kSaveTimeoutSeconds)}), true),
        "/", launcher_environment(fault));
    const auto paused = wait_for_a_stopped_rank(host);
    EXPECT_TRUE(paused.has_value()) << "no rank on " << host << " paused at " << fault;
    return paused;
  }

  // What a killed or cut run must leave: the epochs before the interrupted one (and that one
  // too when it was killed after its rename: `interrupted_committed`; any later ones too when
  // the fault let the job go on: `any_later_committed`), each exactly the uninterrupted run's;
  // then `--resume-from-epoch latest` on the other placement ends the job bit-identical to the
  // uninterrupted run, with no temporary file left.
  void expect_resume_on_other_placement_is_exact(bool interrupted_committed = false,
                                                 bool any_later_committed = false) {
    const auto& uninterrupted = single_host_run(*job_, kKilledRanks);
    const auto killed = results_of(fetch("killed"), "");
    std::vector<std::int64_t> committed;
    for (const auto& [epoch, contents] : killed.epochs) {
      committed.push_back(epoch);
      EXPECT_TRUE(uninterrupted.epochs.count(epoch) == 1 &&
                  uninterrupted.epochs.at(epoch) == contents)
          << "committed epoch " << epoch << " differs from the uninterrupted run's";
    }
    auto expected = std::vector<std::int64_t>{0, 1, 2};
    if (interrupted_committed) {
      expected.push_back(kInterruptedEpoch);
    }
    if (!any_later_committed) {
      EXPECT_EQ(committed, expected)
          << "a committed epoch was lost, or the interrupted one committed before its rename";
    } else {
      EXPECT_TRUE(committed.size() >= expected.size() &&
                  std::equal(expected.begin(), expected.end(), committed.begin()))
          << "a committed epoch was lost";
    }

    const auto resumed =
        run_within(epochrun_on_hosts(kOtherPlacement, kKilledRanks, shared_,
                                     run_args(job_->options, {"--resume-from-epoch", "latest"})),
                   "/", kJobEndsWithinSeconds, launcher_environment());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
    expect_verified();
    const auto directory = fetch("resumed");
    const auto finished = results_of(directory, job_->output_file);
    if (!any_later_committed) {
      EXPECT_TRUE(finished.epochs == uninterrupted.epochs)
          << "the resumed run's checkpoints differ from the uninterrupted run's";
    } else {
      // The epochs whose saves failed stay missing; every other one is the uninterrupted run's.
      for (const auto& [epoch, contents] : finished.epochs) {
        EXPECT_TRUE(uninterrupted.epochs.count(epoch) == 1 &&
                    uninterrupted.epochs.at(epoch) == contents)
            << "epoch " << epoch << " differs from the uninterrupted run's";
      }
      ASSERT_FALSE(finished.epochs.empty());
      EXPECT_EQ(finished.epochs.rbegin()->first, uninterrupted.epochs.rbegin()->first);
    }
    EXPECT_TRUE(finished.output == uninterrupted.output)
        << "the resumed run's model differs from the uninterrupted run's";
    for (const auto& name : list_directory(directory / "ck")) {
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name << " left in the directory";
    }
  }

  // SIGKILL of every rank on `host` while one of them is paused at `fault`: the job ends, then
  // resumes exactly on the other placement.
  void kill_ranks_at(const std::string& fault, const std::string& host = "host2",
                     bool interrupted_committed = false) {
    std::unique_ptr<ChildProcess> job;
    ASSERT_TRUE(start_paused(job, fault, host).has_value());
    const auto killed = ranks_on_host(host);
    EXPECT_EQ(killed.size(), host == "host2" ? 2u : 1u);
    for (int pid : killed) {
      ::kill(pid, SIGKILL);
    }
    const auto ended = job->wait(kJobEndsWithinSeconds);
    ASSERT_TRUE(ended.has_value()) << "the job did not end within " << kJobEndsWithinSeconds
                                   << " s of host2's ranks being killed";
    EXPECT_NE(ended->exit_code, 0) << ended->err;
    expect_resume_on_other_placement_is_exact(interrupted_committed);
  }
  // SIGKILL of `host`'s GlusterFS client while a rank there is paused at `fault`: on that host
  // /shared then fails every call with ENOTCONN, the working directory of its ranks included.
  // The job must end within its bound (a save its ranks cannot take part in fails, and the job
  // goes on or ends with an error, never hangs), every epoch it committed must be the
  // uninterrupted run's, and once start-hosts.sh has mounted the volume again there the resume
  // on the other placement ends bit-identical (`later_saves_may_commit`: the host's failed saves
  // are not the job's last ones).
  void kill_client_at(const std::string& fault, const std::string& host,
                      bool later_saves_may_commit = true) {
    std::unique_ptr<ChildProcess> job;
    const auto paused = start_paused(job, fault, host);
    ASSERT_TRUE(paused.has_value());
    const auto client = recorded_pid("glusterfs@" + host);
    ASSERT_TRUE(client.has_value()) << "no glusterfs@" << host << " in /run/multihost/pids";
    ASSERT_EQ(::kill(*client, SIGKILL), 0);
    ::kill(*paused, SIGCONT);
    const auto ended = job->wait(kJobEndsWithinSeconds);
    ASSERT_TRUE(ended.has_value()) << "the job did not end within " << kJobEndsWithinSeconds
                                   << " s of " << host << "'s file-system client being killed";
    std::cout << "the job ended with exit code " << ended->exit_code << "\n" << ended->err;
    const auto remounted = run_harness({(kHarness / "start-hosts.sh").string()}, 300);
    ASSERT_EQ(remounted.exit_code, 0) << remounted.out << remounted.err;
    expect_resume_on_other_placement_is_exact(false, later_saves_may_commit);
  }
};

TEST_F(MultihostFaults, OneHostsRanksKilledMidEpochResumeExactlyOnAnotherPlacement) {
  kill_ranks_at("epoch-task@" + std::to_string(kInterruptedEpoch) + ":1:STOP");
}

TEST_F(MultihostFaults, OneHostsRanksKilledMidSaveResumeExactlyOnAnotherPlacement) {
  kill_ranks_at("save-write@" + std::to_string(kInterruptedEpoch) + ":1:STOP");
}

// The commit: rank 0 (host1) killed after every rank's bytes are durable and before the rename
// (the epoch is not committed), and right after the rename (it is, though its index and
// retention steps never ran).
TEST_F(MultihostFaults, RankZerosHostKilledBeforeTheCommitsRenameResumesExactly) {
  kill_ranks_at("save-before-rename@" + std::to_string(kInterruptedEpoch) + ":0:STOP", "host1");
}

TEST_F(MultihostFaults, RankZerosHostKilledRightAfterTheCommitsRenameResumesExactly) {
  kill_ranks_at("save-after-rename@" + std::to_string(kInterruptedEpoch) + ":0:STOP", "host1",
                true);
}

// host2's GlusterFS client killed (SIGKILL) while its rank 1 is paused in epoch 3: on host2
// /shared then fails every call with ENOTCONN, the working directory of its ranks included. The
// job must end within its bound (a save its ranks cannot take part in fails, and the job goes
// on or ends with an error, never hangs), every epoch it committed must be the uninterrupted
// run's, and once start-hosts.sh has mounted the volume again on host2 the resume on the other
// placement ends bit-identical.
TEST_F(MultihostFaults, OneHostsFileSystemClientKilledMidRunResumesExactlyOnAnotherPlacement) {
  // heat_diffusion: every rank writes its rows of the field (sgd_regression's ranks on host2
  // write nothing).
  job_ = &job_cases().at(2);
  kill_client_at("epoch-task@" + std::to_string(kInterruptedEpoch) + ":1:STOP", "host2");
}

// --async-checkpoint with sgd_regression's 2 MiB of replicated weights and optimizer state,
// which rank 0's background thread writes with direct I/O (whole aligned pages; on GlusterFS an
// unaligned direct write reports success and fails only at fsync, its data dropped): rank 0
// paused at its write of epoch 3 and host1's client killed. The save must fail, epoch 3 never be
// committed (nor any later one: rank 0's host has no volume), and once host1 has the volume
// again the resume on the other placement ends bit-identical.
TEST_F(MultihostFaults, RankZerosClientKilledDuringADirectBackgroundWriteCommitsNothingOfIt) {
  static const JobCase kDirectJob = {
      "sgd_regression",
      {"--job", "sgd_regression", "--log-level", "warn", "--async-checkpoint",
       "--sgd_regression.features", "262000", "--sgd_regression.samples", "8",
       "--sgd_regression.batch_size", "4", "--sgd_regression.max_epochs", "8",
       "--sgd_regression.loss_threshold", "0", "--sgd_regression.model_file", "model.h5"},
      "model.h5"};
  job_ = &kDirectJob;
  kill_client_at("save-write@" + std::to_string(kInterruptedEpoch) + ":0:STOP", "host1", false);
}

// The storage server's brick process SIGKILLed while rank 1 is paused in epoch 3, and started
// again (`gluster volume start force`, as an administrator would) while it is paused in epoch 5:
// heat_diffusion, whose every rank writes. The saves while the brick is down fail and the job
// goes on; once every host's client answers again, the saves from epoch 5 on commit; the job
// ends 0, and the resume on the other placement ends bit-identical.
TEST_F(MultihostFaults, TheStorageServerRestartedMidRunCostsOnlyTheSavesWhileItWasDown) {
  job_ = &job_cases().at(2);
  const auto pause = [](int epoch) { return "epoch-task@" + std::to_string(epoch) + ":1:STOP"; };
  std::unique_ptr<ChildProcess> job;
  const auto paused = start_paused(job, pause(kInterruptedEpoch) + "," + pause(5));
  ASSERT_TRUE(paused.has_value());
  const std::string in_storage =
      "nsenter --net=/run/netns/storage --mount=/run/multihost/ns/storage.mnt -- ";
  const auto brick = recorded_pid("glusterfsd");
  ASSERT_TRUE(brick.has_value()) << "no glusterfsd in /run/multihost/pids";
  ASSERT_EQ(::kill(*brick, SIGKILL), 0);
  // Until it has run on and stopped again, at epoch 5: stopped, with more context switches
  // than at its first stop (its saves fail at once, so it may be stopped again at any look).
  const auto switches = [](int pid) {
    std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
    long long count = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        count += std::stoll(line.substr(line.find(':') + 1));
      }
    }
    return count;
  };
  const auto stopped = [](int pid) {
    const auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto state = stat.find(") ");
    return state != std::string::npos && stat[state + 2] == 'T';
  };
  const auto at_first_stop = switches(*paused);
  ::kill(*paused, SIGCONT);
  bool paused_again = false;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!paused_again && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    paused_again = stopped(*paused) && switches(*paused) > at_first_stop;
  }
  ASSERT_TRUE(paused_again) << "rank 1 never paused at epoch 5";
  // Started again, and recorded where the harness keeps its processes (so that its scripts
  // still find and stop it). glusterd may not have noticed the brick's end yet, and then
  // `start force` does nothing: again until the volume's status shows the brick online.
  const auto restarted = run_harness(
      {"bash", "-c",
       "for attempt in $(seq 1 30); do " + in_storage +
           "gluster --mode=script volume start mhvol force >/dev/null; pid=$(" + in_storage +
           "gluster --mode=script volume status mhvol | awk '/^Brick/ && $(NF - 1) == \"Y\" "
           "{print $NF}'); [ -n \"$pid\" ] && break; sleep 1; done; [ -n \"$pid\" ] && sed -i "
           "'/^glusterfsd /d' /run/multihost/pids && echo \"glusterfsd $pid $(awk '{sub(/^.*\\) "
           "/, \"\"); print $20}' /proc/$pid/stat)\" >>/run/multihost/pids"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.out << restarted.err;
  for (const auto& host : kHosts) {
    bool answers = false;
    for (int attempt = 0; attempt < 60 && !answers; ++attempt) {
      answers = on_host(host, "ls '" + shared_.string() + "' >/dev/null").exit_code == 0;
      if (!answers) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
    ASSERT_TRUE(answers) << host << "'s client did not answer again within 30 s";
  }
  ::kill(*paused, SIGCONT);
  const auto ended = job->wait(kJobEndsWithinSeconds);
  ASSERT_TRUE(ended.has_value()) << "the job did not end within " << kJobEndsWithinSeconds
                                 << " s of the storage server's restart";
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  const auto committed = CheckpointDirectory(fetch("after-restart") / "ck").committed_epochs();
  EXPECT_EQ(std::count(committed.begin(), committed.end(), kInterruptedEpoch), 0)
      << "epoch 3 was saved while the brick was down";
  EXPECT_EQ(committed.back(), 8) << "no save committed after the restart";
  std::filesystem::remove_all(local_ / "after-restart");
  expect_resume_on_other_placement_is_exact(false, true);
}

// Takes a host off the network (its bridge port down, as a pulled cable) until destroyed: the
// link comes back even when the test fails, before anything is stopped (a process blocked on
// the volume cannot be killed while its request is unanswered).
class HostCutOff {
 public:
  explicit HostCutOff(int host) : port_(Harness::bridge_ + "p" + std::to_string(host)) {
    down_ = set("down");
  }
  ~HostCutOff() { heal(); }
  HostCutOff(const HostCutOff&) = delete;
  HostCutOff& operator=(const HostCutOff&) = delete;

  bool down() const { return down_; }
  void heal() {
    if (down_) {
      down_ = !set("up");
    }
  }

 private:
  bool set(const std::string& state) {
    return run_within({"timeout", "-k", "2", "5", "ip", "link", "set", port_, state}, "/", 30)
               .exit_code == 0;
  }

  std::string port_;
  bool down_ = false;
};

// host2 cut off while rank 1 writes its part of a save: the ranks of host1 and host3 give up
// after --save-timeout (rank 0 names the ranks it waited for) and end; mpirun, which cannot reach
// host2's Open MPI daemon, ends within seconds of the link coming back. Nothing committed is lost.
TEST_F(MultihostFaults, OneHostCutOffMidSaveEndsTheJobAndResumesExactlyOnAnotherPlacement) {
  std::unique_ptr<ChildProcess> job;
  const auto paused =
      start_paused(job, "save-write@" + std::to_string(kInterruptedEpoch) + ":1:STOP");
  ASSERT_TRUE(paused.has_value());
  HostCutOff cut(2);
  ASSERT_TRUE(cut.down()) << "could not take host2's link down";
  ::kill(*paused, SIGCONT);
  // The other hosts' ranks end at the save timeout, while host2 is still cut off.
  const auto deadline = Clock::now() + std::chrono::seconds(kSaveTimeoutSeconds + 50);
  while (Clock::now() < deadline &&
         !(ranks_on_host("host1").empty() && ranks_on_host("host3").empty())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(ranks_on_host("host1").empty() && ranks_on_host("host3").empty())
      << "the ranks of host1 and host3 still ran " << kSaveTimeoutSeconds + 50
      << " s after host2 was cut off in a save with --save-timeout " << kSaveTimeoutSeconds;
  cut.heal();
  ASSERT_FALSE(cut.down()) << "could not bring host2's link back";
  const auto ended = job->wait(60);
  ASSERT_TRUE(ended.has_value()) << "the job did not end within 60 s of host2's link coming back";
  EXPECT_EQ(ended->exit_code, 1) << ended->err;
  // Rank 0 names the rank it waited for, rank 1 (with rank 2, also on host2, when that one
  // was cut off before it arrived too).
  EXPECT_TRUE(std::regex_search(
      ended->err, std::regex("\\[rank 0\\] \\[critical\\] .*ranks? ([0-9]+, )*1(, [0-9]+)* did "
                             "not arrive within " +
                             std::to_string(kSaveTimeoutSeconds) + " s; aborting the job")))
      << ended->err;
  expect_resume_on_other_placement_is_exact();
}

// slurm/epochrun.sbatch with `sbatch -N 3` on the harness's SLURM cluster (slurm-hosts.sh): one
// rank per host, launched by srun or by mpirun, preempted by `scancel --signal=USR1 --full`, by
// `--batch`, or by a one-minute time limit with its warning signal. The job must requeue itself
// and end COMPLETED, bit-identical to an uninterrupted run on one host, with every interrupted
// run recorded (exit 75, the next one resuming from its last committed epoch) and no rank ended
// by a signal. EPOCHRUN_MULTIHOST_SLURM_TRIALS=N runs each case N times (default 1).
enum class Launcher { kSrun, kMpirun };
enum class Preemption { kUsr1Full, kUsr1Batch, kTimeLimit };

const std::map<std::string, std::string>& slurm_environment() {
  static const auto kEnvironment = [] {
    auto environment = kHarnessEnvironment;
    environment["SLURM_CONF"] = "/run/multihost/slurm/slurm.conf";
    return environment;
  }();
  return kEnvironment;
}

ProcessResult slurm_command(const std::vector<std::string>& argv) {
  return run_within(argv, "/", 60, slurm_environment());
}

// 24 epochs of sgd_regression on the hosts (0.2 s each on a quiet machine, 5 s in all; several
// times that when loaded): long enough to be preempted in the middle, short enough for many
// trials (slurm_test.cpp's job). `batches_per_epoch` sets an epoch's work.
constexpr std::int64_t kSlurmLastEpoch = 24;
JobCase slurm_job(int batches_per_epoch, std::int64_t last_epoch = kSlurmLastEpoch) {
  return {"sgd_regression",
          {"--job", "sgd_regression", "--log-level", "warn", "--sgd_regression.features", "512",
           "--sgd_regression.samples", "60000", "--sgd_regression.batch_size", "24576",
           "--sgd_regression.batches_per_epoch", std::to_string(batches_per_epoch),
           "--sgd_regression.max_epochs", std::to_string(last_epoch),
           "--sgd_regression.loss_threshold", "0", "--sgd_regression.model_file", "model.h5"},
          "model.h5"};
}
const JobCase kSlurmJob = slurm_job(25);
// The time-limit case's job: 8 epochs of 8 times the work (at the lighter job's 0.2 s an epoch,
// about 1.6 s an epoch on a quiet machine, 13 s in all), so that it outlasts the window the limit
// leaves a run (kTimeLimitWindowSeconds) on a quiet machine too, where 24 epochs of the lighter job
// ended unstopped in 5 of 10 srun trials; and few epochs, since a loaded machine commits only one
// epoch a run (the launch takes half the window, and the first epoch of every run also
// generates the ranks' data): 8 runs at most, where 24 epochs of 4 times the work took up to 24
// runs of 12 to 13 s.
constexpr std::int64_t kSlurmTimeLimitLastEpoch = 8;
const JobCase kSlurmTimeLimitJob = slurm_job(200, kSlurmTimeLimitLastEpoch);
// A preemption is sent once this epoch has committed.
constexpr std::int64_t kSlurmPreemptAfterEpoch = 3;
// What the time-limit case leaves each run of the job, from its start (see its margin).
constexpr double kTimeLimitWindowSeconds = 8;
// Each trial's job, restarts included, ends within this.
constexpr double kSlurmTrialSeconds = 240;
// The time-limit case's: every run of it commits at least one epoch, but on a loaded machine no
// more than one, so its job may need one run per epoch: 8 runs, 136 to 164 s in all with other
// builds and tests beside it (load average 6 to 30).
constexpr double kSlurmTimeLimitTrialSeconds = 300;

std::string slurm_case_name(const std::tuple<Launcher, Preemption>& param) {
  const std::map<Preemption, std::string> preemptions = {
      {Preemption::kUsr1Full, "ScancelUsr1Full"},
      {Preemption::kUsr1Batch, "ScancelUsr1Batch"},
      {Preemption::kTimeLimit, "TimeLimitWithWarningSignal"}};
  return std::string(std::get<0>(param) == Launcher::kSrun ? "Srun_" : "Mpirun_") +
         preemptions.at(std::get<1>(param));
}

SlurmJobState slurm_job_state(const std::string& id) {
  return parse_slurm_job_state(slurm_command({"scontrol", "-o", "show", "job", id}).out);
}

// The SLURM cluster of the hosts for a suite of trials, and what a trial does with it: submit
// slurm/epochrun.sbatch, follow the job, read what it left.
class MultihostSlurmCluster : public Multihost {
 protected:
  static void SetUpTestSuite() {
    if (!Harness::up_) {
      return;
    }
    const auto started = run_harness({(kHarness / "slurm-hosts.sh").string(), "start"}, 300);
    slurm_up_ = started.exit_code == 0;
    ASSERT_TRUE(slurm_up_) << started.out << started.err;
  }
  static void TearDownTestSuite() {
    if (slurm_up_) {
      const auto stopped = run_harness({(kHarness / "slurm-hosts.sh").string(), "stop"});
      EXPECT_EQ(stopped.exit_code, 0) << stopped.out << stopped.err;
      slurm_up_ = false;
    }
  }
  void SetUp() override {
    Multihost::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    ASSERT_TRUE(slurm_up_) << "slurm-hosts.sh start failed";
  }
  void TearDown() override {
    if (!job_id_.empty()) {
      slurm_command({"scancel", job_id_});
    }
    Multihost::TearDown();
  }

  // The newest epoch of the job's checkpoint directory, as host3 sees it, whose file name
  // `name` matches (the epoch its first group; -1: none): committed checkpoints by default.
  std::int64_t newest_epoch(const std::regex& name = std::regex("epoch-([0-9]{6})\\.h5")) {
    const auto listed = on_host("host3", "ls '" + (trial_dir_ / "run/ck").string() + "'");
    std::int64_t newest = -1;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;
      if (std::regex_match(line, match, name)) {
        newest = std::max<std::int64_t>(newest, std::stoll(match[1]));
      }
    }
    return newest;
  }
  // The newest node-local epoch: its manifest in the checkpoint directory.
  std::int64_t newest_node_local_epoch() {
    return newest_epoch(std::regex("epoch-([0-9]{6})\\.local\\.json"));
  }

  // Submits slurm/epochrun.sbatch on the three hosts, one rank each, with the job's options and
  // `options` after them, `sbatch_options` for sbatch and `extra` in its environment, in a new
  // directory of the volume for trial `trial`; the job's output goes to output_file_.
  void submit(Launcher launcher, const JobCase& job, const std::string& name, int trial,
              const std::vector<std::string>& sbatch_options,
              const std::vector<std::string>& options,
              const std::map<std::string, std::string>& extra = {}) {
    // A trial that failed may have left its job queued: it would take the hosts from this one.
    if (!job_id_.empty()) {
      slurm_command({"scancel", job_id_});
    }
    job_id_.clear();
    // A new directory per trial: a directory removed and made again under the same name is
    // still the old, deleted one for a moment on the other hosts (their clients cache names),
    // and a rank started there has no working directory.
    trial_dir_ = shared_ / ("trial-" + std::to_string(trial));
    const auto made = on_host("host1", "mkdir -p '" + trial_dir_.string() + "'");
    ASSERT_EQ(made.exit_code, 0) << made.err;
    output_file_ = local_ / ("job-" + std::to_string(trial) + ".out");
    std::vector<std::string> sbatch = {"sbatch",
                                       "--parsable",
                                       "-N",
                                       "3",
                                       "--ntasks=3",
                                       "--ntasks-per-node=1",
                                       "--chdir=" + trial_dir_.string(),
                                       "--output=" + output_file_.string(),
                                       "--job-name=" + name};
    sbatch.insert(sbatch.end(), sbatch_options.begin(), sbatch_options.end());
    sbatch.push_back(
        (std::filesystem::path(EPOCHRUN_SOURCE_DIR) / "slurm/epochrun.sbatch").string());
    sbatch.insert(sbatch.end(), job.options.begin(), job.options.end());
    // ck/ under the run directory, as results_of() reads it.
    sbatch.insert(sbatch.end(), {"--checkpoint-dir", "ck"});
    sbatch.insert(sbatch.end(), options.begin(), options.end());
    auto environment = slurm_environment();
    for (const auto& [key, value] : launcher_environment()) {
      environment[key] = value;
    }
    // The ranks talk over the bridge only, whoever launches them (srun's ranks and mpirun's
    // orteds read these from the environment).
    environment["OMPI_MCA_btl"] = "tcp,self";
    environment["OMPI_MCA_btl_tcp_if_include"] = Harness::subnet_;
    environment["OMPI_MCA_oob_tcp_if_include"] = Harness::subnet_;
    environment["EPOCHRUN"] = EPOCHRUN_BINARY;
    environment["EPOCHRUN_RUN_DIR"] = "run";
    environment["EPOCHRUN_LAUNCHER"] = launcher == Launcher::kSrun ? "srun" : "mpirun";
    for (const auto& [key, value] : extra) {
      environment[key] = value;
    }
    const auto submitted = run_within(sbatch, "/", 60, environment);
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    job_id_ = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
  }

  static Clock::time_point deadline_in(double seconds) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  static void pause() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

  // Follows the job until it is no longer queued or running, or `done` holds, at most until
  // `deadline`, skipping only SLURM's requeue delay; its state then. Given `early_warnings` (a
  // one-minute limit), a job killed by its limit's warning before the batch script ran is
  // requeued, at most twice, and counted there.
  SlurmJobState follow(Clock::time_point deadline, const std::function<bool()>& done = {},
                       int* early_warnings = nullptr) {
    SlurmJobState state;
    bool pending = false;
    auto pending_since = Clock::now();
    while (Clock::now() < deadline && !(done && done())) {
      state = slurm_job_state(job_id_);
      // No state: scontrol got no answer this time; ask again.
      if (state.state.empty()) {
        pause();
        continue;
      }
      if (early_warnings != nullptr && *early_warnings < 2 &&
          killed_by_an_early_warning(state, read_file(output_file_))) {
        ++*early_warnings;
        const auto requeued = slurm_command({"scontrol", "requeue", job_id_});
        EXPECT_EQ(requeued.exit_code, 0) << requeued.err;
        pause();
        continue;
      }
      if (state.state != "PENDING" && state.state != "RUNNING" && state.state != "COMPLETING" &&
          state.state != "REQUEUED" && state.state != "CONFIGURING" && state.state != "SIGNALING") {
        break;
      }
      if (state.state == "PENDING" && state.restarts > 0 && state.reason == "BeginTime") {
        if (!pending) {
          pending = true;
          pending_since = Clock::now();
        } else if (Clock::now() - pending_since >= std::chrono::seconds(2) &&
                   !has_slurm_step_processes(job_id_)) {
          slurm_command({"scontrol", "update", "JobId=" + job_id_, "StartTime=now"});
          pending = false;
        }
      } else {
        pending = false;
      }
      pause();
    }
    return state;
  }

  // The job's run directory and runs.jsonl, copied through host3.
  std::filesystem::path fetch_run(int trial) {
    return fetch("run-" + std::to_string(trial)) / trial_dir_.filename() / "run";
  }
  static std::vector<nlohmann::json> history_of(const std::filesystem::path& run) {
    std::vector<nlohmann::json> history;
    std::istringstream lines(read_file(run / "ck/runs.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      history.push_back(nlohmann::json::parse(line));
    }
    return history;
  }

  static inline bool slurm_up_ = false;
  std::string job_id_;
  std::filesystem::path trial_dir_;    // this trial's directory on the volume
  std::filesystem::path output_file_;  // this trial's job output
};

class MultihostSlurm : public MultihostSlurmCluster,
                       public ::testing::WithParamInterface<std::tuple<Launcher, Preemption>> {
 protected:
  // One trial: submit, preempt, let it run to its end (skipping only SLURM's requeue delay),
  // check the outcome.
  void preempt_and_finish(Launcher launcher, Preemption preemption, int trial) {
    const bool time_limit = preemption == Preemption::kTimeLimit;
    const auto& job = time_limit ? kSlurmTimeLimitJob : kSlurmJob;
    const auto last_epoch = time_limit ? kSlurmTimeLimitLastEpoch : kSlurmLastEpoch;
    const auto& reference = single_host_run(job, 3);
    std::vector<std::string> sbatch_options;
    std::vector<std::string> options;
    if (time_limit) {
      // The warning comes at one of slurmctld's checks, anywhere in the first minute; the
      // runner's own prediction stops a run once the next epoch would not end --time-margin
      // before the end. The margin leaves each run a window of kTimeLimitWindowSeconds from
      // the job's start, its start-up included: shorter than the job takes on any machine,
      // so the limit always stops it, and long enough for a few epochs per run when loaded.
      // A margin taken from the single-host reference run let 11 of 20 jobs finish
      // unstopped when that run was slowed by a build beside it and the trials were not.
      sbatch_options = {"--time=00:01:00", "--signal=B:USR1@50"};
      options = {"--time-margin", std::to_string(60 - kTimeLimitWindowSeconds)};
    }
    submit(launcher, job, slurm_case_name(GetParam()), trial, sbatch_options, options);
    if (HasFatalFailure()) {
      return;
    }

    const auto deadline =
        deadline_in(time_limit ? kSlurmTimeLimitTrialSeconds : kSlurmTrialSeconds);
    if (!time_limit) {
      while (newest_epoch() < kSlurmPreemptAfterEpoch && Clock::now() < deadline) {
        ASSERT_NE(slurm_job_state(job_id_).state, "COMPLETED") << "finished before preempted";
        pause();
      }
      ASSERT_GE(newest_epoch(), kSlurmPreemptAfterEpoch)
          << "job " << job_id_ << " did not commit epoch " << kSlurmPreemptAfterEpoch
          << " in time\n"
          << read_file(output_file_);
      const auto sent =
          slurm_command({"scancel", "--signal=USR1",
                         preemption == Preemption::kUsr1Full ? "--full" : "--batch", job_id_});
      ASSERT_EQ(sent.exit_code, 0) << sent.err;
    }

    int early_warnings = 0;
    const auto state = follow(deadline, {}, time_limit ? &early_warnings : nullptr);
    const std::string output = read_file(output_file_);
    std::cout << slurm_case_name(GetParam()) << " trial " << trial << ": job " << job_id_ << " "
              << state.state << " after " << state.restarts << " restart(s)\n";
    ASSERT_EQ(state.state, "COMPLETED") << "job " << job_id_ << " (" << state.reason << ")\n"
                                        << output;
    EXPECT_GE(state.restarts - early_warnings, 1) << output;
    // No rank ended by a signal: srun names the signal of a task ("task 1: Terminated", "task
    // 0: User defined signal 1") where an exit says "task 1: Exited with exit code 75", mpirun
    // names a process that "exited on signal", the script a status of 128 + N after it passed a
    // signal on. Also not the time limit's warning while a run's ranks are still starting (SLURM
    // sends it up to a minute early): the script holds it until they catch it
    // (docs/PREEMPTION.md, "A signal while the run starts").
    EXPECT_FALSE(std::regex_search(
        output, std::regex("task [0-9]+: (?!Exited with exit code)|exited on signal|ended with "
                           "status")))
        << "a rank was ended by a signal:\n"
        << output;

    const auto run = fetch_run(trial);
    const auto finished = results_of(run, job.output_file);
    ASSERT_EQ(finished.epochs.size(), reference.epochs.size()) << output;
    EXPECT_TRUE(finished.epochs == reference.epochs)
        << "the checkpoints differ from the uninterrupted single-host run's";
    EXPECT_TRUE(finished.output == reference.output)
        << "the model differs from the uninterrupted single-host run's";

    // Every run recorded itself (one killed by an early warning ran nothing): each interrupted
    // one with exit 75, the next resuming from its last committed epoch, and no epoch computed
    // twice.
    const auto history = history_of(run);
    ASSERT_EQ(static_cast<int>(history.size()), state.restarts + 1 - early_warnings) << output;
    std::int64_t epochs_run = 0;
    for (std::size_t i = 0; i < history.size(); ++i) {
      epochs_run += history[i]["epochs_run"].get<std::int64_t>();
      if (i + 1 < history.size()) {
        EXPECT_EQ(history[i]["exit_code"], 75) << history[i].dump();
        EXPECT_EQ(history[i + 1]["resumed_from"], history[i]["last_committed_epoch"]) << output;
      }
    }
    EXPECT_EQ(history.back()["exit_code"], 0);
    EXPECT_EQ(epochs_run, last_epoch) << "an epoch was computed twice:\n" << output;
  }
};

TEST_P(MultihostSlurm, JobEndsCompletedAndIdentical) {
  const char* trials_text = std::getenv("EPOCHRUN_MULTIHOST_SLURM_TRIALS");
  const int trials = trials_text != nullptr ? std::max(1, std::atoi(trials_text)) : 1;
  // Every trial runs, also after one failed, so that a run of many trials counts them all.
  const auto* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int passed = 0;
  for (int trial = 1; trial <= trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int failures_before = result->total_part_count();
    preempt_and_finish(std::get<0>(GetParam()), std::get<1>(GetParam()), trial);
    passed += result->total_part_count() == failures_before ? 1 : 0;
  }
  std::cout << slurm_case_name(GetParam()) << ": " << passed << " of " << trials
            << " trials passed\n";
}

INSTANTIATE_TEST_SUITE_P(EveryLauncherAndPreemption, MultihostSlurm,
                         ::testing::Combine(::testing::Values(Launcher::kSrun, Launcher::kMpirun),
                                            ::testing::Values(Preemption::kUsr1Full,
                                                              Preemption::kUsr1Batch,
                                                              Preemption::kTimeLimit)),
                         [](const auto& test) { return slurm_case_name(test.param); });

// Whether SIGUSR1 is pending for process `pid` (sent while it is stopped, say).
bool usr1_pending(int pid) {
  std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
      const auto mask = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
      if ((mask >> (SIGUSR1 - 1)) & 1U) {
        return true;
      }
    }
  }
  return false;
}

class MultihostSlurmLevels : public MultihostSlurmCluster {};

// The levels under SLURM: slurm/epochrun.sbatch on the three hosts (srun) with a checkpoint
// every epoch in each host's own /local, a flush every 5 and partner copies across hosts.
// Run 1 is preempted (`scancel --signal=USR1 --batch`) after epoch 3 ran, while node-local
// epoch 2 is its newest checkpoint (epoch 0 flushed): rank 1 is paused there (EPOCHRUN_FAULT
// STOP) until the signal is pending on it, so that the run stops at epoch 3 exactly. A stop's
// checkpoint is flushed, and its node-local copies kept: the requeued run loads epoch 3 from
// every host's own copy. That run saves epochs 4 to 7 node-local only, and in epoch 8 (rank 1
// held there by a WAIT fault, so that epoch 8 is never saved) host2's rank is SIGKILLed, as when
// a node fails: the job ends FAILED, and `scontrol requeue` starts it again on the same hosts,
// every one back with its /local. That run must resume from node-local epoch 7 (runs.jsonl:
// resumed_from 7, resumed_from_level node-local; the log line says where each part was) and end
// COMPLETED, every flushed epoch and the model bit-identical to the uninterrupted single-host
// run, having lost only the epoch in progress.
TEST_F(MultihostSlurmLevels, PreemptedThenAHostsRankKilledResumesFromTheNodeLocalLevel) {
  const std::string local = "/local/epochrun-multihost-slurm-levels";
  const auto wipe = [&] {
    for (const auto& host : kHosts) {
      on_host(host, "rm -rf '" + local + "'");
    }
  };
  wipe();
  const auto& reference = single_host_run(kSlurmJob, 3);
  auto job = kSlurmJob;
  const auto level = std::find(job.options.begin(), job.options.end(), "--log-level");
  job.options.erase(level, level + 2);
  const auto release = local_ / "release";
  submit(Launcher::kSrun, job, "NodeLocalLevels", 1, {},
         {"--log-level", "info", "--local-dir", local, "--flush-every", "5", "--local-redundancy",
          "partner"},
         {{"EPOCHRUN_FAULT", "epoch@3:1:STOP,epoch@8:1:WAIT"},
          {"EPOCHRUN_FAULT_RELEASE", release.string()}});
  ASSERT_FALSE(HasFatalFailure());
  const auto deadline = deadline_in(kSlurmTrialSeconds);
  // What host3 lists once its cached names have caught up (about a second).
  const auto listed = [&](const std::function<std::int64_t()>& newest, std::int64_t expected) {
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (newest() != expected && Clock::now() < until) {
      pause();
    }
    return newest();
  };

  // Run 1, rank 1 paused after epoch 3 ran: node-local epoch 2 is the newest, epoch 0 flushed.
  auto paused = wait_for_a_stopped_rank("host2");
  while (!paused && Clock::now() < deadline) {
    paused = wait_for_a_stopped_rank("host2");
  }
  ASSERT_TRUE(paused.has_value()) << "rank 1 never reached epoch 3\n" << read_file(output_file_);
  EXPECT_EQ(listed([&] { return newest_node_local_epoch(); }, 2), 2);
  EXPECT_EQ(listed([&] { return newest_epoch(); }, 0), 0);
  const auto sent = slurm_command({"scancel", "--signal=USR1", "--batch", job_id_});
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  // Until the batch script has passed it on to srun, and srun to the paused rank.
  while (!usr1_pending(*paused) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(usr1_pending(*paused)) << read_file(output_file_);
  ::kill(*paused, SIGCONT);

  // Run 2, after the requeue: epochs 4 to 7 node-local, rank 1 held in epoch 8. A node fails.
  follow(deadline, [&] { return newest_node_local_epoch() >= 7; });
  ASSERT_EQ(newest_node_local_epoch(), 7) << read_file(output_file_);
  EXPECT_EQ(listed([&] { return newest_epoch(); }, 3), 3);
  const auto manifest =
      on_host("host3", "cat '" + (trial_dir_ / "run/ck/epoch-000007.local.json").string() + "'");
  const auto described = nlohmann::json::parse(manifest.out, nullptr, false);
  EXPECT_TRUE(described.is_object() && described.value("redundancy", "") == "partner")
      << manifest.out;
  const auto ranks = ranks_on_host("host2");
  ASSERT_EQ(ranks.size(), 1U) << read_file(output_file_);
  ::kill(ranks.front(), SIGKILL);
  const auto failed = follow(deadline);
  ASSERT_NE(failed.state, "COMPLETED") << read_file(output_file_);
  EXPECT_EQ(failed.restarts, 1);

  // Every host back, /local as it was: SLURM requeues the job.
  std::ofstream(release.string()).put('\n');
  const auto requeued = slurm_command({"scontrol", "requeue", job_id_});
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err;
  const auto state = follow(deadline);
  const std::string output = read_file(output_file_);
  std::cout << "NodeLocalLevels: job " << job_id_ << " " << failed.state << " after run 2, then "
            << state.state << " after " << state.restarts << " restart(s)\n";
  ASSERT_EQ(state.state, "COMPLETED") << "job " << job_id_ << " (" << state.reason << ")\n"
                                      << output;
  EXPECT_EQ(state.restarts, 2) << output;
  EXPECT_NE(output.find("resumed job sgd_regression from epoch 3 (the node-local copies in " +
                        local + ", each verified against ck/epoch-000003.h5)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("resumed job sgd_regression from node-local epoch 7: every rank's copy "
                        "in " +
                        local +
                        " verified against ck/epoch-000007.local.json; parts written on host1 "
                        "(rank 0), host2 (rank 1), host3 (rank 2)"),
            std::string::npos)
      << output;

  const auto run = fetch_run(1);
  const auto history = history_of(run);
  ASSERT_GE(history.size(), 2U) << output;
  const auto& preempted = history.front();
  EXPECT_EQ(preempted["exit_code"], 75) << preempted.dump();
  EXPECT_EQ(preempted["stop_kind"], "preempted") << preempted.dump();
  EXPECT_EQ(preempted["last_committed_epoch"], 3) << preempted.dump();
  // Run 2 recorded nothing, or its failure (SIGKILL ended the other ranks too).
  for (std::size_t i = 1; i + 1 < history.size(); ++i) {
    EXPECT_NE(history[i]["exit_code"], 0) << history[i].dump();
  }
  const auto& resumed = history.back();
  EXPECT_EQ(resumed["resumed_from"], 7) << resumed.dump();
  EXPECT_EQ(resumed["resumed_from_level"], "node-local") << resumed.dump();
  EXPECT_EQ(resumed["exit_code"], 0) << resumed.dump();
  EXPECT_EQ(resumed["epochs_run"], kSlurmLastEpoch - 7) << resumed.dump();

  const auto finished = results_of(run, job.output_file);
  for (const auto epoch : {std::int64_t{0}, std::int64_t{3}, kSlurmLastEpoch}) {
    EXPECT_EQ(finished.epochs.count(epoch), 1U) << "epoch " << epoch << " was not flushed";
  }
  for (const auto& [epoch, contents] : finished.epochs) {
    EXPECT_TRUE(reference.epochs.count(epoch) == 1 && reference.epochs.at(epoch) == contents)
        << "epoch " << epoch << " differs from the uninterrupted single-host run's";
  }
  EXPECT_TRUE(finished.output == reference.output)
      << "the model differs from the uninterrupted single-host run's";
  wipe();
}

}  // namespace
}  // namespace epochrun::testing
