// The program as a user runs it: `mpiexec -n 3 epochrun ...` in a fresh directory, its exit
// codes, its one-line errors, its summary, and its files read back by h5py and h5dump.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "durable_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// `epochrun args...` on `ranks` ranks (1: run directly, as on a login node).
ProcessResult epochrun(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                       int ranks = 1) {
  std::vector<std::string> argv;
  if (ranks > 1) {
    argv = epochrun_on_ranks(ranks, args);
  } else {
    argv = {EPOCHRUN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
  }
  return run_process(argv, cwd, kMpiEnvironment);
}

nlohmann::json read_json(const std::filesystem::path& file) {
  return nlohmann::json::parse(read_file(file));
}

std::string source_file(const std::string& relative) {
  return std::string(EPOCHRUN_SOURCE_DIR) + "/" + relative;
}

class Cli : public ::testing::Test {
 protected:
  ScratchDir cwd_;
};

// Runs `argv` in `cwd` like run_process, but a run still going after `seconds` is killed and
// returned as nullopt, so that a hang fails the test instead of holding it.
std::optional<ProcessResult> run_bounded(const std::vector<std::string>& argv,
                                         const std::filesystem::path& cwd, double seconds = 120) {
  ChildProcess child(argv, cwd, kMpiEnvironment);
  return child.wait(seconds);
}

// The sum pipeline on 3 ranks: 4 epochs, 145 on every node, and each epoch's file, read with h5py,
// holds that epoch's totals; h5dump reads every file.
TEST_F(Cli, SumPipelineOnThreeRanksIsReadableByH5pyAndH5dump) {
  auto result =
      epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--summary-json", "S"},
               cwd_.path(), 3);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto summary = read_json(cwd_ / "S");
  EXPECT_EQ(summary["last_epoch"], 4);
  EXPECT_EQ(summary["epochs_run"], 4);
  EXPECT_EQ(summary["num_ranks"], 3);
  EXPECT_TRUE(summary["resumed_from"].is_null());
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json({0, 1, 2, 3, 4}));
  EXPECT_EQ(summary["failed_saves"], nlohmann::json::array());
  EXPECT_NE(summary["stop_reason"].get<std::string>().find("reader_exhausted"), std::string::npos);
  ASSERT_EQ(summary["outputs"].size(), 3u);
  for (const auto& [node, outputs] : summary["outputs"].items()) {
    EXPECT_EQ(outputs["total"]["values"], nlohmann::json({145})) << node;
  }

  const char* script = R"(
import h5py, sys
for epoch in range(5):
    with h5py.File("D/epoch-%06d.h5" % epoch, "r") as f:
        assert f.attrs["format"] == "epochrun-checkpoint", f.attrs["format"]
        assert int(f.attrs["epoch"]) == epoch
        totals = [int(row[0]) for row in f["nodes/total"][...]]  # one row per node
        print(epoch, *totals)
)";
  auto h5py = run_process({SYSTEM_PYTHON, "-c", script}, cwd_.path());
  ASSERT_EQ(h5py.exit_code, 0) << h5py.err;
  EXPECT_EQ(h5py.out,
            "0 100 100 100\n1 103 103 103\n2 115 115 115\n3 136 136 136\n4 145 145 145\n");

  for (int epoch = 0; epoch <= 4; ++epoch) {
    char name[32];
    std::snprintf(name, sizeof name, "D/epoch-%06d.h5", epoch);
    auto dump = run_process({H5DUMP_BINARY, name}, cwd_.path());
    EXPECT_EQ(dump.exit_code, 0) << name << ": " << dump.err;
    EXPECT_NE(dump.out.find("\"total\""), std::string::npos);
  }
  // One progress line per epoch, from rank 0 only.
  int epoch_lines = 0;
  for (const auto& line : result.err_lines()) {
    if (line.find("] epoch ") != std::string::npos && line.find(" done in ") != std::string::npos) {
      ++epoch_lines;
      EXPECT_NE(line.find("[rank 0]"), std::string::npos) << line;
      EXPECT_NE(line.find("/s)"), std::string::npos) << "no bandwidth: " << line;
    }
  }
  EXPECT_EQ(epoch_lines, 4);
}

TEST_F(Cli, ResumesFromAnEpochOrTheLatestAndRefusesAMissingOne) {
  ASSERT_EQ(
      epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"}, cwd_.path(), 3).exit_code,
      0);

  auto from_two = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                            "--resume-from-epoch", "2", "--summary-json", "two.json"},
                           cwd_.path(), 3);
  ASSERT_EQ(from_two.exit_code, 0) << from_two.err;
  auto two = read_json(cwd_ / "two.json");
  EXPECT_EQ(two["resumed_from"], 2);
  EXPECT_EQ(two["epochs_run"], 2);
  EXPECT_EQ(two["outputs"]["trainer_1"]["total"]["values"], nlohmann::json({145}));

  auto latest = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                          "--resume-from-epoch", "latest", "--summary-json", "latest.json"},
                         cwd_.path(), 3);
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_EQ(read_json(cwd_ / "latest.json")["resumed_from"], 4);

  auto missing = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                           "--resume-from-epoch", "9", "--summary-json", "missing.json"},
                          cwd_.path(), 3);
  EXPECT_EQ(missing.exit_code, 3);
  auto lines = error_lines(missing);
  ASSERT_EQ(lines.size(), 1u) << missing.err;
  EXPECT_NE(lines[0].find("epoch 9"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("(committed epochs: 0, 1, 2, 3, 4)"), std::string::npos) << lines[0];
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "missing.json"));
}

struct BadInput {
  std::vector<std::string> args;
  std::string expected_in_message;
  std::string ini = "";  // written to bad.ini first when not empty
};

TEST_F(Cli, EachBadInputIsOneLineExitTwoAndWritesNothing) {
  const std::vector<BadInput> cases = {
      {{}, "missing command"},
      {{"frobnicate"}, "unknown command"},
      {{"run"}, "no job given"},
      {{"run", "--job", "nope"}, "unknown job 'nope'"},
      {{"run", "--job", "sum_pipeline", "--bogus"}, "--bogus"},
      {{"run", "--job", "sum_pipeline", "stray"}, "stray"},
      {{"run", "--job", "sum_pipeline", "--num-epochs", "abc"}, "num-epochs"},
      {{"run", "--job", "sum_pipeline", "--num-epochs", "0"}, "--num-epochs must be at least 1"},
      {{"run", "--job", "sum_pipeline", "--resume-from-epoch", "soon"}, "resume-from-epoch"},
      {{"run", "--job", "sum_pipeline", "--log-level", "loud"}, "log level"},
      {{"run", "--job", "sum_pipeline", "--mpi-io-hint", "romio_cb_write"},
       "--mpi-io-hint takes KEY=VALUE"},
      {{"run", "--job", "sum_pipeline", "--mpi-io-hint", "Cb=1"}, "got 'Cb=1'"},
      {{"run", "--job", "sum_pipeline", "--upload-dir", "s3://bucket/x"},
       "unsupported upload destination"},
      {{"run", "--job", "sum_pipeline", "--summary-json", "no/such/dir/s.json"}, "summary-json"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", ""}, "checkpoint-dir"},
      {{"run", "--job", "sum_pipeline", "--keep-last", "0"}, "--keep-last must be at least 1"},
      {{"run", "--job", "sum_pipeline", "--keep-every", "-2"}, "keep-every"},
      {{"run", "--job", "sum_pipeline", "--task-failure-timeout", "0"},
       "--task-failure-timeout must be more than 0"},
      {{"run", "--job", "sum_pipeline", "--task-failure-timeout", "nan"},
       "--task-failure-timeout must be more than 0"},
      {{"run", "--job", "sum_pipeline", "--task-failure-timeout", "soon"}, "task-failure-timeout"},
      {{"run", "--job", "sum_pipeline", "--preempt-signals", "USR1,BOGUS"},
       "invalid --preempt-signals 'USR1,BOGUS': unknown signal 'BOGUS'"},
      {{"run", "--job", "sum_pipeline", "--preempt-signals", "SIGUSR1"},
       "unknown signal 'SIGUSR1'"},
      {{"run", "--job", "sum_pipeline", "--preempt-signals", ""}, "unknown signal ''"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-every", "0"},
       "--checkpoint-every must be at least 1, got 0"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-interval", "-5"},
       "--checkpoint-interval must be a number of seconds more than 0 (or 0: off), got -5"},
      {{"run", "--job", "sum_pipeline", "--allow-config-change", "sum_pipeline.nope"},
       "--allow-config-change 'sum_pipeline.nope' is not an option of job sum_pipeline"},
      {{"run", "--job", "sum_pipeline", "--allow-config-change", "checkpoint-dir"},
       "is not an option of job sum_pipeline"},
      {{"run", "--job", "sum_pipeline", "--time-budget", "0"},
       "--time-budget must be a number of seconds more than 0, got 0"},
      {{"run", "--job", "sum_pipeline", "--time-budget", "inf"}, "--time-budget must be"},
      {{"run", "--job", "sum_pipeline", "--time-margin", "-1"},
       "--time-margin must be a number of seconds of at least 0, got -1"},
      {{"run", "--job", "sgd_regression", "--sgd_regression.learning_rate", "-1"}, "learning_rate"},
      {{"run", "--job", "sgd_regression", "--sgd_regression.learning_rate", "fast"},
       "learning_rate"},
      {{"run", "--job", "sum_pipeline", "--sum_pipeline.items_per_epoch", "0"}, "items_per_epoch"},
      {{"run", "--config", "missing.ini"}, "missing.ini"},
      {{"run", "--config", "bad.ini"}, "typo", "job = sum_pipeline\ntypo = 1\n"},
      {{"run", "--config", "bad.ini"},
       "momentum",
       "job = sgd_regression\n[sgd_regression]\nmomentum = 2\n"},
      {{"run", "--config", "bad.ini"}, "unknown job", "job = missing_job\n"},
      {{"inspect"}, "checkpoint directory"},
      {{"inspect", "no_such_dir"}, "not a directory"},
      {{"list-jobs", "extra"}, "no arguments"},
      // Paths that can never work: inside a symlink loop; a checkpoint directory that is a
      // file, a loop or a dangling link, or lies below one.
      {{"run", "--config", "loop/run.ini"}, "config file 'loop/run.ini'"},
      {{"run", "--job", "sum_pipeline", "--summary-json", "loop/s.json"}, "--summary-json"},
      {{"inspect", "loop"}, "'loop' is not a directory"},
      {{"inspect", "loop/D"}, "'loop/D' is not a directory"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", "file"},
       "--checkpoint-dir 'file' can never hold a checkpoint: file is not a directory"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", "file/D"}, "file is not a directory"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", "loop"}, "can never hold"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", "loop/D"}, "can never hold"},
      {{"run", "--job", "sum_pipeline", "--checkpoint-dir", "dangling/D"},
       "dangling is a dangling symbolic link"},
      // Boost would read -1 into an unsigned option as 2^64 - 1.
      {{"run", "--job", "sgd_regression", "--sgd_regression.seed", "-1"},
       "--sgd_regression.seed must not be negative, got '-1'"},
      {{"run", "--config", "bad.ini"},
       "--sgd_regression.seed must not be negative",
       "job = sgd_regression\n[sgd_regression]\nseed = -7\n"},
  };
  for (const auto& bad : cases) {
    ScratchDir cwd;
    std::filesystem::create_symlink("loop", cwd / "loop");
    std::filesystem::create_symlink("nowhere/x", cwd / "dangling");
    write_file(cwd / "file", "not a directory");
    if (!bad.ini.empty()) {
      std::ofstream(cwd / "bad.ini") << bad.ini;
    }
    const auto before = list_directory(cwd.path());
    auto result = epochrun(bad.args, cwd.path());
    std::string shown;
    for (const auto& arg : bad.args) {
      shown += arg + " ";
    }
    EXPECT_EQ(result.exit_code, 2) << shown << "\n" << result.err;
    auto lines = result.err_lines();
    ASSERT_EQ(lines.size(), 1u) << shown << "\n" << result.err;
    EXPECT_EQ(lines[0].rfind("epochrun: error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(bad.expected_in_message), std::string::npos) << shown << "\n"
                                                                         << lines[0];
    EXPECT_EQ(list_directory(cwd.path()), before) << shown << " wrote a file";
  }
}

TEST_F(Cli, UnderMpiexecAUsageErrorIsPrintedOnceNotOncePerRank) {
  auto result = epochrun({"run", "--job", "nope"}, cwd_.path(), 3);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(error_lines(result).size(), 1u) << result.err;
  EXPECT_TRUE(list_directory(cwd_.path()).empty());
}

// The race CI once lost: ranks 1 and 2 fail at once, mpiexec kills rank 0 before it has
// printed, and the user sees only the launcher's banner. Rank 0 is held back by a second here,
// which made that happen every time before the ranks met in MPI before exiting.
TEST_F(Cli, UnderMpiexecTheErrorLineSurvivesASlowFirstRank) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--job", "nope"},
        std::vector<std::string>{"run", "--bogus-flag"}, std::vector<std::string>{"frobnicate"},
        std::vector<std::string>{"list-jobs", "extra"}}) {
    auto argv = mpiexec_prefix(3);
    argv.insert(
        argv.end(),
        {"sh", "-c", R"(if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then sleep 1; fi; exec "$0" "$@")",
         EPOCHRUN_BINARY});
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = run_process(argv, cwd_.path(), kMpiEnvironment);
    EXPECT_EQ(result.exit_code, 2) << args[0] << " " << args.back() << "\n" << result.err;
    EXPECT_EQ(error_lines(result).size(), 1u) << args[0] << " " << args.back() << "\n"
                                              << result.err;
  }
  EXPECT_TRUE(list_directory(cwd_.path()).empty());
}

// A rank that fails before the run while the others go on (here a flag only rank 2 is given,
// through mpiexec's MPMD form; in the field, a working directory gone on one node): it used to
// wait in a barrier the others never entered, and they in the runner's first collective call,
// for ever. Now it gives up after its bounded wait, prints its line with its rank and ends
// every rank.
TEST_F(Cli, UnderMpiexecARankFailingAloneBeforeTheRunEndsTheJob) {
  auto argv = mpiexec_prefix(2);
  argv.insert(argv.end(),
              {EPOCHRUN_BINARY, "run", "--job", "sum_pipeline", "--checkpoint-dir", "D", ":", "-n",
               "1", EPOCHRUN_BINARY, "run", "--job", "sum_pipeline", "--bogus-flag"});
  const auto result = run_bounded(argv, cwd_.path(), 90);
  ASSERT_TRUE(result.has_value()) << "the job did not end";
  EXPECT_NE(result->exit_code, 0);
  EXPECT_NE(result->err.find("epochrun: error: unrecognised option '--bogus-flag'"),
            std::string::npos)
      << result->err;
  EXPECT_NE(result->err.find("rank 2 failed before the run while the other ranks went on"),
            std::string::npos)
      << result->err;
}

// A task failing on one rank of a job whose tasks make no collective calls: the other ranks
// meet it in the runner's agreement, and the job ends cleanly with exit 1 and one line naming
// the rank and the task -- no abort.
TEST_F(Cli, ATaskFailingOnOneRankEndsTheJobWithOneLineNamingRankAndTask) {
  auto result =
      run_process(epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"}),
                  cwd_.path(), with_fault("epoch-task@3:1:THROW"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const auto lines = error_lines(result);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_NE(lines[0].find("rank 1: task 'read_and_add' of the epoch group on trainer_1"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(result.err.find("MPI_ABORT"), std::string::npos) << result.err;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2}));
}

// Two runs on one directory: the second is refused (exit 3, naming the first) and touches
// nothing -- in particular not the first run's files, which it would otherwise take for the
// leftovers of a crash. The lock goes with the first run.
TEST_F(Cli, ASecondRunOnTheSameDirectoryIsRefusedWhileTheFirstRuns) {
  const auto command = epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir",
                                             "D", "--resume-from-epoch", "latest"});
  ChildProcess first(command, cwd_.path(), with_fault("epoch-task@2:0:STOP"));
  const auto paused = wait_for_a_stopped_child(first);
  ASSERT_TRUE(paused.has_value()) << "the first run never paused";
  // Rank 0 writes index.json in the background: stopped, it may be in the middle of it.
  const auto listing = [&] {
    auto names = list_directory(cwd_ / "D");
    std::erase_if(names, [](const std::string& name) { return name.starts_with(".index"); });
    return names;
  };
  const auto files_before = listing();
  EXPECT_EQ(files_before,
            (std::vector<std::string>{".epochrun.lock", "epoch-000000.h5", "epoch-000001.h5",
                                      "index.json", "metrics.jsonl"}));

  auto second = run_process(command, cwd_.path(), kMpiEnvironment);
  EXPECT_EQ(second.exit_code, 3) << second.err;
  const auto lines = error_lines(second);
  ASSERT_EQ(lines.size(), 1u) << second.err;
  EXPECT_NE(lines[0].find("is in use by another run (pid " + std::to_string(*paused) + " on "),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(listing(), files_before);

  ::kill(*paused, SIGCONT);
  auto ended = first.wait(120);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  // The lock file stays (removing it would let a run on another host lock a file that has lost
  // its name), free and without a holder's record.
  const auto lock = cwd_ / "D" / ".epochrun.lock";
  EXPECT_EQ(read_file(lock), "");
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << "the lock was not released";
  ::close(fd);
  auto third = run_process(command, cwd_.path(), kMpiEnvironment);
  EXPECT_EQ(third.exit_code, 0) << third.err;
}

TEST_F(Cli, TheIniFileConfiguresTheRunAndTheCommandLineWins) {
  auto result = epochrun(
      {"run", "--config", source_file("config/sgd_regression.ini"), "--sgd_regression.max_epochs",
       "2", "--sgd_regression.loss_threshold", "0", "--summary-json", "s.json"},
      cwd_.path(), 3);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto summary = read_json(cwd_ / "s.json");
  EXPECT_EQ(summary["job"], "sgd_regression");
  EXPECT_EQ(summary["last_epoch"], 2);
  EXPECT_NE(summary["stop_reason"].get<std::string>().find("epoch_limit"), std::string::npos);
  EXPECT_EQ(summary["checkpoint_dir"], "checkpoints/sgd_regression");  // from the INI file
  EXPECT_TRUE(std::filesystem::exists(cwd_ / "checkpoints/sgd_regression/epoch-000002.h5"));
  EXPECT_TRUE(std::filesystem::exists(cwd_ / "sgd_model.h5"));
  // The run's effective configuration is recorded in the checkpoint.
  CheckpointReader reader(cwd_ / "checkpoints/sgd_regression/epoch-000002.h5");
  auto config = nlohmann::json::parse(reader.header().config_json);
  EXPECT_EQ(config["sgd_regression.max_epochs"], 2);
  EXPECT_EQ(config["sgd_regression.learning_rate"], 0.02);
}

TEST_F(Cli, TheShippedIniFileHoldsTheBuiltInDefaults) {
  auto with_file =
      epochrun({"run", "--config", source_file("config/sgd_regression.ini"), "--num-epochs", "1",
                "--checkpoint-dir", "a", "--sgd_regression.model_file", ""},
               cwd_.path());
  ASSERT_EQ(with_file.exit_code, 0) << with_file.err;
  auto built_in = epochrun({"run", "--job", "sgd_regression", "--num-epochs", "1",
                            "--checkpoint-dir", "b", "--sgd_regression.model_file", ""},
                           cwd_.path());
  ASSERT_EQ(built_in.exit_code, 0) << built_in.err;
  auto job_keys = [](const std::filesystem::path& file) {
    auto config = nlohmann::json::parse(CheckpointReader(file).header().config_json);
    nlohmann::json keys;
    for (const auto& [key, value] : config.items()) {
      if (key.rfind("sgd_regression.", 0) == 0) {
        keys[key] = value;
      }
    }
    return keys;
  };
  EXPECT_EQ(job_keys(cwd_ / "a/epoch-000001.h5"), job_keys(cwd_ / "b/epoch-000001.h5"));
}

TEST_F(Cli, InspectListsCheckpointsAndVerifyFindsDamage) {
  ASSERT_EQ(
      epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"}, cwd_.path(), 3).exit_code,
      0);
  auto listing = epochrun({"inspect", "D", "--json", "--blobs"}, cwd_.path());
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  auto json = nlohmann::json::parse(listing.out);
  ASSERT_EQ(json["checkpoints"].size(), 5u);
  const auto& last = json["checkpoints"][4];
  EXPECT_EQ(last["epoch"], 4);
  EXPECT_EQ(last["job"], "sum_pipeline");
  EXPECT_EQ(last["num_ranks"], 3);
  EXPECT_EQ(last["nodes"]["trainer_2"].size(), 4u);

  auto text = epochrun({"inspect", "D", "--blobs"}, cwd_.path());
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("  trainer_1/\n    cursor     i64[]    8 bytes"), std::string::npos)
      << text.out;

  // Flip one bit of trainer_0's reader values in epoch 2.
  ASSERT_TRUE(flip_bit_in_pattern(cwd_ / "D/epoch-000002.h5", int64_bytes(0, 10), 0, 3 * 8));
  auto verify = epochrun({"inspect", "D", "--verify"}, cwd_.path());
  auto explicit_resume = epochrun(
      {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--resume-from-epoch", "2"},
      cwd_.path(), 3);
  EXPECT_EQ(explicit_resume.exit_code, 3) << explicit_resume.err;
  ASSERT_EQ(error_lines(explicit_resume).size(), 1u) << explicit_resume.err;
  EXPECT_NE(error_lines(explicit_resume)[0].find("/nodes/values[0] (trainer_0): checksum mismatch"),
            std::string::npos)
      << explicit_resume.err;
  EXPECT_EQ(verify.exit_code, 3);
  EXPECT_NE(verify.out.find("epoch 2  epoch-000002.h5"), std::string::npos);
  EXPECT_NE(verify.out.find("CORRUPT"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("checksum mismatch"), std::string::npos) << verify.out;
}

// `inspect --verify` while a `--keep-last 1` run deletes each checkpoint soon after it was
// committed: a checkpoint deleted between the listing and the reading is gone, not corrupt
// (before, about 3% of the calls reported a healthy file as corrupt, once with a size of
// 18446744073709551615 bytes).
TEST_F(Cli, InspectVerifyDuringRetentionNeverCallsAVanishedCheckpointCorrupt) {
  auto args = small_sgd_regression_options(300);
  args.insert(args.begin(), {"run", "--checkpoint-dir", "D", "--keep-last", "1"});
  ChildProcess job(epochrun_on_ranks(3, args), cwd_.path(), kMpiEnvironment);
  int calls = 0;
  std::optional<ProcessResult> ended;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!(ended = job.wait(0))) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the run did not end";
    if (!std::filesystem::exists(cwd_ / "D" / "index.json")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // nothing committed yet
      continue;
    }
    auto inspected = epochrun({"inspect", "D", "--verify", "--json"}, cwd_.path());
    ++calls;
    ASSERT_EQ(inspected.exit_code, 0) << "call " << calls << ": " << inspected.out;
    const auto listing = nlohmann::json::parse(inspected.out);
    for (const auto& entry : listing["checkpoints"]) {
      EXPECT_TRUE(entry["valid"].get<bool>()) << entry;
      EXPECT_LT(entry["bytes"].get<std::uint64_t>(), 1ULL << 20) << entry;
    }
  }
  EXPECT_EQ(ended->exit_code, 0) << ended->err;
  EXPECT_GT(calls, 0);
  std::printf("inspect --verify ran %d times during the run\n", calls);
}

TEST_F(Cli, UploadAndSaveFailureAreReportedInTheSummary) {
  auto uploaded = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--upload-dir",
                            "U", "--summary-json", "s.json"},
                           cwd_.path(), 3);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  EXPECT_EQ(list_directory(cwd_ / "U"), (std::vector<std::string>{"epoch-000004.h5"}));
  EXPECT_EQ(read_json(cwd_ / "s.json")["uploaded_to"], "U/epoch-000004.h5");

  auto failing = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "/proc",
                           "--no-directory-lock", "--summary-json", "f.json"},
                          cwd_.path(), 3);
  ASSERT_EQ(failing.exit_code, 0) << failing.err;
  auto summary = read_json(cwd_ / "f.json");
  EXPECT_EQ(summary["last_epoch"], 4);
  EXPECT_EQ(summary["failed_saves"].size(), 5u);
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json::array());
  EXPECT_NE(failing.err.find("checkpoint for epoch 3 failed, the job goes on"), std::string::npos)
      << failing.err;

  auto no_checkpoint_to_upload = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir",
                                           "/proc", "--no-directory-lock", "--upload-dir", "U2"},
                                          cwd_.path(), 3);
  EXPECT_EQ(no_checkpoint_to_upload.exit_code, 4) << no_checkpoint_to_upload.err;
}

TEST_F(Cli, RetentionFlagsAndDeleteOnSuccess) {
  auto kept = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--keep-last", "1",
                        "--keep-every", "3", "--summary-json", "s.json"},
                       cwd_.path(), 3);
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(
      list_directory(cwd_ / "D"),
      (std::vector<std::string>{".epochrun.lock", "epoch-000000.h5", "epoch-000003.h5",
                                "epoch-000004.h5", "index.json", "metrics.jsonl", "runs.jsonl"}));
  EXPECT_EQ(read_json(cwd_ / "s.json")["deleted_checkpoints"], nlohmann::json({1, 2}));

  auto backup = epochrun(
      {"run", "--job", "sum_pipeline", "--checkpoint-dir", "B", "--delete-checkpoints-on-success"},
      cwd_.path(), 3);
  ASSERT_EQ(backup.exit_code, 0) << backup.err;
  // The checkpoints go; the run history and the metrics stay.
  EXPECT_EQ(list_directory(cwd_ / "B"),
            (std::vector<std::string>{".epochrun.lock", "metrics.jsonl", "runs.jsonl"}));
}

// Whether `directory` holds a temporary name of `target` (a save's, or a retired checkpoint's).
bool has_temporary_of(const std::filesystem::path& directory, const std::string& target) {
  const auto names = list_directory(directory);
  return std::ranges::any_of(names, [&](const std::string& name) {
    return temporary_target(name) == std::optional<std::string>(target);
  });
}

// sum_pipeline on 3 ranks into D with --keep-last 1 (and `more` flags), held at `fault`
// (phase@epoch:rank:WAIT) until release_and_expect_its_end().
class HeldKeepLastOneRun {
 public:
  HeldKeepLastOneRun(const std::filesystem::path& cwd, const std::string& fault,
                     const std::vector<std::string>& more)
      : cwd_(cwd), job_(arguments(more), cwd, environment(cwd, fault)) {}

  // Whether `reached` came true within 20 s (polled every 10 ms).
  bool reaches(const std::function<bool()>& reached) {
    for (int polls = 0; polls < 2000; ++polls) {
      if (reached()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Releases the run and checks how it ends: epochs 0 to 3 deleted, only epoch 4 left.
  void release_and_expect_its_end() {
    write_file(cwd_ / "release", "");
    const auto ended = job_.wait(120);
    ASSERT_TRUE(ended.has_value()) << "the job did not end";
    EXPECT_EQ(ended->exit_code, 0) << ended->err;
    EXPECT_EQ(read_json(cwd_ / "s.json")["deleted_checkpoints"], nlohmann::json({0, 1, 2, 3}));
    EXPECT_EQ(list_directory(cwd_ / "D"),
              (std::vector<std::string>{".epochrun.lock", "epoch-000004.h5", "index.json",
                                        "metrics.jsonl", "runs.jsonl"}));
  }

 private:
  static std::vector<std::string> arguments(const std::vector<std::string>& more) {
    std::vector<std::string> args = {
        "run", "--job",          "sum_pipeline", "--checkpoint-dir", "D", "--keep-last",
        "1",   "--summary-json", "s.json"};
    args.insert(args.end(), more.begin(), more.end());
    return epochrun_on_ranks(3, args);
  }
  static std::map<std::string, std::string> environment(const std::filesystem::path& cwd,
                                                        const std::string& fault) {
    auto environment = with_fault(fault);
    environment["EPOCHRUN_FAULT_RELEASE"] = (cwd / "release").string();
    return environment;
  }

  std::filesystem::path cwd_;
  ChildProcess job_;
};

// Retention renames a retired checkpoint away and deletes it on a thread of its own: the job
// goes on while the deletion of epoch 0 is held (EPOCHRUN_FAULT=remove@0:0:WAIT), and the run
// ends only once it is done. When the job's own thread deleted the files, holding that deletion
// held the job (epoch 4 never came within the bound).
TEST_F(Cli, RetentionDeletesOffTheJobsThreadAndTheRunWaitsForIt) {
  HeldKeepLastOneRun run(cwd_.path(), "remove@0:0:WAIT", {});
  EXPECT_TRUE(run.reaches([&] {
    return std::filesystem::exists(cwd_ / "D" / "epoch-000004.h5") &&
           has_temporary_of(cwd_ / "D", "epoch-000000.h5");
  })) << "epoch 4 was not committed within 20 s while the deletion of epoch 0 was held";
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "D" / "epoch-000000.h5"));
  run.release_and_expect_its_end();
}

// Freeing a large retired checkpoint stalls the file system's journal, so its deletion waits
// until the next save is laid out: while rank 0 is held inside the lay-out of epoch 2 (the
// asynchronous save that follows the commit of epoch 1, which retired epoch 0), epoch 0's
// file is renamed away but still there. Before the hold, it was being deleted meanwhile.
TEST_F(Cli, ARetiredCheckpointIsDeletedOnlyAfterTheNextSavesLayOut) {
  HeldKeepLastOneRun run(cwd_.path(), "save-lay-out@2:0:WAIT", {"--async-checkpoint"});
  ASSERT_TRUE(run.reaches([&] {
    return std::filesystem::exists(cwd_ / "D" / "epoch-000001.h5") &&
           has_temporary_of(cwd_ / "D", "epoch-000002.h5");
  })) << "the lay-out of epoch 2 was not reached within 20 s";
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "D" / "epoch-000000.h5"));
  EXPECT_TRUE(has_temporary_of(cwd_ / "D", "epoch-000000.h5"))
      << "epoch 0's retired file was deleted during the next save's lay-out";
  run.release_and_expect_its_end();
}

// On a disk with room for two checkpoints and little more (a real 80 KiB tmpfs), an
// asynchronous run with --keep-last 1 commits every epoch, as a synchronous run does: the
// retired checkpoint whose deletion would wait for the next lay-out is deleted first when the
// save may need its room. (Held, it failed the saves of epochs 2 and 4.)
TEST_F(Cli, OnANearlyFullDiskRetiredCheckpointsAreDeletedBeforeTheNextSave) {
  TmpfsMount disk(cwd_ / "disk", "80k");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  auto result = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "disk/D",
                          "--keep-last", "1", "--async-checkpoint", "--summary-json", "s.json"},
                         cwd_.path(), 3);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto summary = read_json(cwd_ / "s.json");
  EXPECT_EQ(summary["failed_saves"], nlohmann::json::array()) << result.err;
  EXPECT_EQ(summary["last_committed_epoch"], 4);
  EXPECT_EQ(summary["deleted_checkpoints"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(CheckpointDirectory(cwd_ / "disk" / "D").committed_epochs(),
            (std::vector<std::int64_t>{4}));
}

// A deletion that fails on retention's own thread is a warning, not the end of the process:
// the run finishes, and the retired file stays for the next run's cleanup of temporaries.
TEST_F(Cli, ADeletionThatFailsOffTheJobsThreadIsAWarning) {
  auto result =
      run_within(epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                                       "--keep-last", "1", "--summary-json", "s.json"}),
                 cwd_.path(), 120, with_fault("remove@0:0:THROW"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("could not delete"), std::string::npos) << result.err;
  EXPECT_TRUE(has_temporary_of(cwd_ / "D", "epoch-000000.h5"));
  EXPECT_EQ(read_json(cwd_ / "s.json")["deleted_checkpoints"], nlohmann::json({0, 1, 2, 3}));
}

// With the upload failed, deleting the checkpoints would leave the job's final state nowhere.
// They stay, and the log says so.
TEST_F(Cli, DeleteOnSuccessKeepsTheCheckpointsWhenTheUploadFailed) {
  write_file(cwd_ / "U", "a file where the upload directory should be\n");
  auto result = epochrun({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--upload-dir",
                          "U", "--delete-checkpoints-on-success", "--summary-json", "s.json"},
                         cwd_.path(), 3);
  EXPECT_EQ(result.exit_code, 4) << result.err;
  auto summary = read_json(cwd_ / "s.json");
  EXPECT_FALSE(summary["upload_error"].is_null());
  EXPECT_EQ(summary["deleted_checkpoints"], nlohmann::json::array());
  EXPECT_EQ(summary["last_committed_epoch"], 4);
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(result.err.find("the upload failed: the checkpoints in D are kept"), std::string::npos)
      << result.err;
}

// A preempted run whose last save fails still asks for a requeue (exit 75), and its summary and
// log say where a resume would continue: here nowhere, since no checkpoint fits on a real 8 KiB
// tmpfs.
TEST_F(Cli, APreemptedRunWhoseSaveFailedStillExits75AndSaysWhatIsCommitted) {
  TmpfsMount disk(cwd_ / "disk", "8k");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  ChildProcess job(epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir",
                                         "disk/D", "--summary-json", "s.json"}),
                   cwd_.path(), with_fault("epoch-task@2:1:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "rank 1 never paused in epoch 2";
  ::kill(*paused, SIGUSR1);
  ::kill(*paused, SIGCONT);
  const auto result = job.wait(120);
  ASSERT_TRUE(result.has_value()) << "the preempted job did not end";
  EXPECT_EQ(result->exit_code, 75) << result->err;
  const auto summary = read_json(cwd_ / "s.json");
  EXPECT_EQ(summary["stop_kind"], "preempted");
  EXPECT_TRUE(summary["last_committed_epoch"].is_null());
  EXPECT_EQ(summary["failed_saves"].size(), 3u);  // epochs 0, 1, 2
  EXPECT_NE(result->err.find("there is no committed checkpoint; exit code 75"), std::string::npos)
      << result->err;
}

std::vector<std::string> small_sgd(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run",
                                   "--job",
                                   "sgd_regression",
                                   "--checkpoint-dir",
                                   "D",
                                   "--summary-json",
                                   "s.json",
                                   "--sgd_regression.features",
                                   "4",
                                   "--sgd_regression.samples",
                                   "768",
                                   "--sgd_regression.loss_threshold",
                                   "0",
                                   "--sgd_regression.model_file",
                                   ""};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A checkpoint written with another seed is not resumed by a default-seed run (that would mix
// two runs): exit 3 naming the option and both values, nothing written. An explicit
// --allow-config-change resumes and records the change.
TEST_F(Cli, ResumingWithAnotherRunDefiningOptionIsRefusedUnlessAllowed) {
  auto first =
      epochrun(small_sgd({"--sgd_regression.seed", "7", "--sgd_regression.max_epochs", "2"}),
               cwd_.path(), 3);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto files_before = list_directory(cwd_ / "D");
  const auto history_before = read_file(cwd_ / "D" / "runs.jsonl");
  std::filesystem::remove(cwd_ / "s.json");

  auto refused =
      epochrun(small_sgd({"--sgd_regression.max_epochs", "3", "--resume-from-epoch", "latest"}),
               cwd_.path(), 3);
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  const auto lines = error_lines(refused);
  ASSERT_EQ(lines.size(), 1u) << refused.err;
  EXPECT_NE(lines[0].find("the checkpoint of epoch 2 was written with --sgd_regression.seed 7, "
                          "this run has 20261122"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("--allow-config-change sgd_regression.seed"), std::string::npos)
      << lines[0];
  EXPECT_EQ(list_directory(cwd_ / "D"), files_before);
  EXPECT_EQ(read_file(cwd_ / "D" / "runs.jsonl"), history_before);
  EXPECT_FALSE(std::filesystem::exists(cwd_ / "s.json"));

  auto allowed = epochrun(small_sgd({"--sgd_regression.max_epochs", "3", "--resume-from-epoch",
                                     "latest", "--allow-config-change", "sgd_regression.seed"}),
                          cwd_.path(), 3);
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  const auto changes = read_json(cwd_ / "s.json")["config_changes"];
  EXPECT_EQ(changes, nlohmann::json::parse(R"([
      {"key": "sgd_regression.max_epochs", "old": 2, "new": 3},
      {"key": "sgd_regression.seed", "old": 7, "new": 20261122}])"));
}

// Options that may change on resume are logged, recorded and applied -- max_epochs included
// (it used to be ignored: the epoch counter in the checkpoint kept the old limit).
TEST_F(Cli, ChangedOptionsOnResumeAreLoggedRecordedAndApplied) {
  auto first = epochrun(small_sgd({"--sgd_regression.max_epochs", "6", "--num-epochs", "2"}),
                        cwd_.path(), 3);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed =
      epochrun(small_sgd({"--sgd_regression.max_epochs", "4", "--sgd_regression.learning_rate",
                          "0.01", "--resume-from-epoch", "latest"}),
               cwd_.path(), 3);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto summary = read_json(cwd_ / "s.json");
  EXPECT_EQ(summary["resumed_from"], 2);
  EXPECT_EQ(summary["last_epoch"], 4);  // the new limit, not the checkpoint's 6
  EXPECT_EQ(summary["config_changes"], nlohmann::json::parse(R"([
      {"key": "sgd_regression.learning_rate", "old": 0.02, "new": 0.01},
      {"key": "sgd_regression.max_epochs", "old": 6, "new": 4}])"));
  EXPECT_NE(resumed.err.find("configuration changed since the checkpoint of epoch 2: "
                             "sgd_regression.max_epochs 6 -> 4 (applied)"),
            std::string::npos)
      << resumed.err;
}

// Found by fuzz_config: paths are bytes on Linux, and recording a non-UTF-8 one in the config
// attribute or the summary made the JSON library throw (exit 1, or a failure at the run's end).
TEST_F(Cli, ANonUtf8CheckpointDirectoryWorks) {
  const std::string directory = "ck\xc8\xff";
  auto result = epochrun(
      {"run", "--job", "sum_pipeline", "--checkpoint-dir", directory, "--summary-json", "s.json"},
      cwd_.path(), 3);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::exists(cwd_ / directory / "epoch-000004.h5"));
  auto summary = read_json(cwd_ / "s.json");
  EXPECT_EQ(summary["last_epoch"], 4);
  EXPECT_EQ(summary["checkpoint_dir"],
            "ck\xef\xbf\xbd\xef\xbf\xbd");  // each invalid byte became U+FFFD
  auto listing = epochrun({"inspect", directory, "--json"}, cwd_.path());
  EXPECT_EQ(listing.exit_code, 0) << listing.err;
}

TEST_F(Cli, ListJobsNamesTheBuiltInJobs) {
  auto jobs = epochrun({"list-jobs"}, cwd_.path());
  EXPECT_EQ(jobs.exit_code, 0);
  EXPECT_NE(jobs.out.find("sgd_regression"), std::string::npos);
  EXPECT_NE(jobs.out.find("sum_pipeline"), std::string::npos);
}

// A job's run help holds the run's own options and the job's.
TEST_F(Cli, RunHelpOfAJobListsTheRunOptionsAndTheJobsOwn) {
  auto help = epochrun({"run", "--job", "sgd_regression", "--help"}, cwd_.path());
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--resume-from-epoch"), std::string::npos);
  EXPECT_NE(help.out.find("--sgd_regression.learning_rate"), std::string::npos);
}

TEST_F(Cli, TopLevelHelpExitsZero) {
  EXPECT_EQ(epochrun({"--help"}, cwd_.path()).exit_code, 0);
}

// A directory epochrun creates (the checkpoint directory and its missing parents, the upload
// directory and its) exists after a power loss only once its entry in its parent is on disk.
// A power loss cannot be staged here, so the test watches the system calls: every mkdir is
// followed by an fsync of the parent directory.
TEST_F(Cli, EveryDirectoryItCreatesIsFsyncedIntoItsParent) {
  ScratchDir traces;  // one file per thread (-ff): no call is split by another thread's
  auto result =
      run_bounded({STRACE_BINARY, "-ff", "-y", "-qq", "-e", "trace=mkdir,mkdirat,fsync", "-o",
                   (traces / "trace").string(), EPOCHRUN_BINARY, "run", "--job", "sum_pipeline",
                   "--checkpoint-dir", "a/b/ckpt", "--upload-dir", "u/v", "--num-epochs", "1"},
                  cwd_.path());
  ASSERT_TRUE(result.has_value()) << "the run did not end";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  std::vector<std::vector<std::string>> threads;
  for (const auto& name : list_directory(traces.path())) {
    auto& calls = threads.emplace_back();
    std::istringstream in(read_file(traces / name));
    for (std::string line; std::getline(in, line);) {
      calls.push_back(line);
    }
  }
  const auto root = std::filesystem::canonical(cwd_.path());
  for (const std::string directory : {"a", "a/b", "a/b/ckpt", "u", "u/v"}) {
    const auto parent = "<" + (root / directory).parent_path().string() + ">)";
    bool created = false;
    bool fsynced = false;
    for (const auto& calls : threads) {
      auto made = std::find_if(calls.begin(), calls.end(), [&](const std::string& call) {
        return call.starts_with("mkdir(\"" + directory + "\", ") && call.ends_with(" = 0");
      });
      if (made != calls.end()) {
        created = true;
        fsynced = std::any_of(made, calls.end(), [&](const std::string& call) {
          return call.starts_with("fsync(") && call.find(parent) != std::string::npos;
        });
      }
    }
    EXPECT_TRUE(created) << directory << " was not created by epochrun";
    EXPECT_TRUE(fsynced) << directory << " was never fsynced into its parent";
  }
}

// A leftover under the lock's name (a directory, a dangling symlink) must not switch the lock
// off: the run is refused with exit 3 and one line saying why and how to go on, before it
// touches anything. --no-directory-lock is the user's explicit choice to run unlocked.
TEST_F(Cli, ALockThatCannotBeTakenRefusesTheRunUnlessUnlockedIsAsked) {
  const std::vector<std::pair<std::string, std::string>> obstacles = {
      {"a directory", "is a directory"}, {"a dangling symlink", "is a symbolic link"}};
  for (const auto& [obstacle, reason] : obstacles) {
    ScratchDir cwd;
    const auto lock = cwd / "D" / ".epochrun.lock";
    std::filesystem::create_directories(cwd / "D");
    if (obstacle == "a directory") {
      std::filesystem::create_directory(lock);
    } else {
      std::filesystem::create_symlink(cwd / "nowhere", lock);
    }
    const auto before = list_directory(cwd / "D");
    std::vector<std::string> args = {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"};
    auto refused = run_bounded(epochrun_on_ranks(3, args), cwd.path());
    ASSERT_TRUE(refused.has_value()) << obstacle << ": the run did not end";
    EXPECT_EQ(refused->exit_code, 3) << obstacle << "\n" << refused->err;
    const auto lines = error_lines(*refused);
    ASSERT_EQ(lines.size(), 1u) << obstacle << "\n" << refused->err;
    EXPECT_NE(lines[0].find("D/.epochrun.lock " + reason), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("--no-directory-lock"), std::string::npos) << lines[0];
    EXPECT_EQ(list_directory(cwd / "D"), before) << obstacle;

    args.push_back("--no-directory-lock");
    auto unlocked = run_bounded(epochrun_on_ranks(3, args), cwd.path());
    ASSERT_TRUE(unlocked.has_value()) << obstacle << ": the unlocked run did not end";
    EXPECT_EQ(unlocked->exit_code, 0) << obstacle << "\n" << unlocked->err;
    EXPECT_NE(unlocked->err.find("running without the checkpoint directory lock"),
              std::string::npos)
        << unlocked->err;
    EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(),
              (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  }
}

// A negative value of an unsigned option is refused (EachBadInputIsOneLineExitTwoAndWritesNothing);
// the largest one is a value, not a mistake.
TEST_F(Cli, TheLargestUnsignedValueIsAccepted) {
  auto largest =
      epochrun({"run", "--job", "sgd_regression", "--sgd_regression.seed", "18446744073709551615",
                "--num-epochs", "1", "--sgd_regression.model_file", ""},
               cwd_.path());
  EXPECT_EQ(largest.exit_code, 0) << largest.err;
}

// Every plain python snippet of docs/FORMAT.md (they read format version 3) runs with the
// system's python3 and h5py (Debian's) against a checkpoint of a real run, so the documentation
// never shows code that fails on what epochrun writes. (```python v2 blocks read version 2
// files: PackedCheckpoint runs them.)
TEST_F(Cli, EveryPythonSnippetOfTheFormatDocumentRuns) {
  auto run = run_bounded(epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir",
                                               "checkpoints", "--num-epochs", "4"}),
                         cwd_.path());
  ASSERT_TRUE(run.has_value()) << "the run did not end";
  ASSERT_EQ(run->exit_code, 0) << run->err;
  const auto snippets = python_blocks(read_file(source_file("docs/FORMAT.md")));
  for (const auto& snippet : snippets) {
    auto python = run_bounded({SYSTEM_PYTHON, "-c", snippet}, cwd_.path());
    ASSERT_TRUE(python.has_value()) << snippet;
    EXPECT_EQ(python->exit_code, 0) << snippet << "\n" << python->err;
  }
  EXPECT_GE(snippets.size(), 2u);
}

// A symlink loop planted under a checkpoint's name or an epochrun temporary's name is neither
// a checkpoint nor a temporary: inspect lists the real checkpoints (it aborted), and a resume
// goes on from the newest real one (it failed with "filesystem error", exit 1).
TEST_F(Cli, SymlinkLoopsUnderCheckpointOrTemporaryNamesAreIgnored) {
  auto first = run_bounded(
      epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"}), cwd_.path());
  ASSERT_TRUE(first.has_value() && first->exit_code == 0) << (first ? first->err : "hung");
  for (const std::string name : {"epoch-000009.h5", ".epoch-000009.h5.tmp.4242.0123456789abcdef"}) {
    std::filesystem::create_symlink(name, cwd_ / "D" / name);
  }
  auto listing = run_bounded({EPOCHRUN_BINARY, "inspect", "D", "--json"}, cwd_.path());
  ASSERT_TRUE(listing.has_value()) << "inspect did not end";
  ASSERT_EQ(listing->exit_code, 0) << listing->err;
  EXPECT_EQ(nlohmann::json::parse(listing->out)["checkpoints"].size(), 5u);
  auto resumed = run_bounded(
      epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                            "--resume-from-epoch", "latest", "--summary-json", "s.json"}),
      cwd_.path());
  ASSERT_TRUE(resumed.has_value()) << "the resumed run did not end";
  ASSERT_EQ(resumed->exit_code, 0) << resumed->err;
  EXPECT_EQ(read_json(cwd_ / "s.json")["resumed_from"], 4);
  EXPECT_TRUE(std::filesystem::is_symlink(cwd_ / "D/.epoch-000009.h5.tmp.4242.0123456789abcdef"));
}

}  // namespace
}  // namespace epochrun::testing
