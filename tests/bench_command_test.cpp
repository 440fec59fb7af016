// `epochrun bench` as a user runs it: `mpiexec -n 3 epochrun bench ... --json F`. Only the
// report's shape is checked; its timings decide nothing here.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// `epochrun bench args...` on 3 ranks in `cwd`; fails the test when it runs over 5 minutes.
ProcessResult bench(const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  std::vector<std::string> full = {"bench", "--machine-mib", "1"};
  full.insert(full.end(), args.begin(), args.end());
  ChildProcess child(epochrun_on_ranks(3, full), cwd, kMpiEnvironment);
  auto result = child.wait(300);
  if (!result) {
    ADD_FAILURE() << "epochrun bench did not end within 5 minutes";
    return {};
  }
  return *result;
}

// The machine's figures (the first row) as the bench measured them: every figure there and
// positive, the ranks and cores consistent, and the same figures printed before the table.
void expect_machine_figures(const nlohmann::json& machine, const std::string& out) {
  ASSERT_EQ(machine.at("name"), "machine") << machine;
  for (const char* key : {"first_touch_mb_per_s", "page_cache_copy_mb_per_s",
                          "plain_write_mb_per_s", "hinted_write_mb_per_s"}) {
    ASSERT_TRUE(machine.at(key).is_number()) << key << " in " << machine;
    const double value = machine.at(key).get<double>();
    EXPECT_TRUE(std::isfinite(value) && value > 0) << key << " = " << value;
    char printed[32];
    std::snprintf(printed, sizeof printed, "%.0f", value);
    EXPECT_NE(out.find(printed), std::string::npos) << key << " " << printed << "\n" << out;
  }
  EXPECT_EQ(machine.at("bytes_per_rank"), 1 << 20);
  EXPECT_EQ(machine.at("ranks"), 3);
  EXPECT_GE(machine.at("ranks_on_host").get<int>(), 1);
  EXPECT_LE(machine.at("ranks_on_host").get<int>(), 3);
  EXPECT_GE(machine.at("cores").get<int>(), 1);
  EXPECT_GE(machine.at("cpus_allowed").get<int>(), 1);
  EXPECT_LE(machine.at("cpus_allowed").get<int>(), machine.at("cores").get<int>());
  EXPECT_FALSE(machine.at("file_system").get<std::string>().empty());
  EXPECT_FALSE(machine.at("transparent_hugepages").get<std::string>().empty());
  EXPECT_NE(out.find("machine: "), std::string::npos) << out;
  EXPECT_LT(out.find("machine: "), out.find("measure ")) << "the figures come before the table";
}

// A row's ratio with its median's 95% interval: the interval holds the ratio, `stable` says
// whether it is within +-5% of it, and the rounds are what the seconds hold.
void expect_ratio_figures(const nlohmann::json& row, std::int64_t min_rounds,
                          std::int64_t max_rounds) {
  const auto rounds = row.at("rounds").get<std::int64_t>();
  EXPECT_EQ(row.at("seconds").size(), std::size_t(rounds)) << row;
  EXPECT_GE(rounds, min_rounds) << row;
  EXPECT_LE(rounds, max_rounds) << row;
  const auto& interval = row.at("ratio_interval");
  if (rounds < 6) {
    EXPECT_TRUE(interval.is_null()) << row;
    EXPECT_FALSE(row.at("ratio_stable").get<bool>()) << row;
    return;
  }
  ASSERT_EQ(interval.size(), 2u) << row;
  const double ratio = row.at("ratio").get<double>();
  EXPECT_LE(interval[0].get<double>(), ratio) << row;
  EXPECT_GE(interval[1].get<double>(), ratio) << row;
  EXPECT_EQ(row.at("ratio_stable").get<bool>(),
            interval[0].get<double>() >= 0.95 * ratio && interval[1].get<double>() <= 1.05 * ratio)
      << row;
}

TEST(BenchCommand, WritesOneJsonObjectPerMeasureWithFinitePositiveRatios) {
  ScratchDir cwd;
  auto result = bench({"--mib-per-rank", "1", "--rounds", "5", "--max-rounds", "7", "--blobs", "4",
                       "--json", "F", "--dir", "work"},
                      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("save"), std::string::npos) << result.out;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";

  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  ASSERT_TRUE(rows.is_array());
  expect_machine_figures(rows.at(0), result.out);
  std::vector<std::string> names;
  for (const auto& row : rows) {
    names.push_back(row.at("name").get<std::string>());
    if (!row.contains("ratio")) {
      continue;  // the machine or a memory row
    }
    expect_ratio_figures(row, 5, 7);
    for (const char* key : {"median_seconds", "limit_median_seconds", "ratio", "min_seconds",
                            "max_seconds", "mb_per_second"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key << " in " << row.dump();
      const double value = row.at(key).get<double>();
      EXPECT_TRUE(std::isfinite(value) && value > 0) << key << " = " << value;
    }
    EXPECT_LE(row["min_seconds"].get<double>(), row["median_seconds"].get<double>());
    EXPECT_LE(row["median_seconds"].get<double>(), row["max_seconds"].get<double>());
    EXPECT_EQ(row.at("ranks"), 3);
    EXPECT_EQ(row.at("mib_per_rank"), 1.0);
    EXPECT_EQ(row.at("blobs"), 4);
    EXPECT_EQ(row.at("min_rounds"), 5);
    EXPECT_TRUE(row.at("cold").is_boolean());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"machine", "save", "save_vs_hinted_write", "load",
                                             "write_limit", "write_limit_hinted", "read_limit",
                                             "save_memory", "load_memory"}));
  // Every measure ran the same rounds, and the save is the same series against both limits.
  EXPECT_EQ(rows[1]["seconds"], rows[2]["seconds"]);
  EXPECT_EQ(rows[1]["rounds"], rows[3]["rounds"]);
  EXPECT_EQ(rows[1]["limit"], "write_limit");
  EXPECT_EQ(rows[2]["limit"], "write_limit_hinted");
  for (const auto& row : rows) {
    if (row.contains("peak_added_bytes")) {
      // The peak resident memory of a save and a load against the state's size.
      EXPECT_EQ(row.at("state_bytes").get<double>(), 1 << 20) << row;
      EXPECT_GE(row.at("peak_rss_bytes").get<double>(), row.at("rss_before_bytes").get<double>());
      EXPECT_GT(row.at("peak_rss_bytes").get<double>(), 0) << row;
    }
  }
  EXPECT_EQ(result.out.find("targets (ratio <= limit):"), std::string::npos)
      << "only with --targets";
}

// --global-arrays at 1 MiB per rank: every save and load of the array, with its limit, in
// the JSON with positive figures, the targets printed with their verdicts, nothing left behind.
TEST(BenchCommand, GlobalArraysMeasureTheCollectiveSaveAndLoadsAgainstTheirLimits) {
  ScratchDir cwd;
  auto result = bench(
      {"--global-arrays", "--mib-per-rank", "1", "--rounds", "5", "--json", "F", "--dir", "work"},
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  ASSERT_TRUE(rows.is_array());
  expect_machine_figures(rows.at(0), result.out);
  std::map<std::string, std::string> limits;
  for (const auto& row : rows) {
    if (row.at("name") == "machine") {
      continue;
    }
    limits[row.at("name").get<std::string>()] = row.at("limit").get<std::string>();
    for (const char* key : {"median_seconds", "limit_median_seconds", "ratio", "min_seconds",
                            "max_seconds", "mb_per_second"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key << " in " << row.dump();
      const double value = row.at(key).get<double>();
      EXPECT_TRUE(std::isfinite(value) && value > 0) << key << " = " << value;
    }
    EXPECT_EQ(row.at("seconds").size(), 5u);
    EXPECT_EQ(row.at("ranks"), 3);
    // 1 MiB of float64 per rank: 32 rows of 4096 on each of the 3 ranks of the grid [3, 1].
    EXPECT_EQ(row.at("array_shape"), nlohmann::json::parse("[96, 4096]"));
    EXPECT_EQ(row.at("process_grid"), nlohmann::json::parse("[3, 1]"));
    EXPECT_EQ(row.at("bytes_per_rank"), 1 << 20);
    EXPECT_TRUE(row.at("cold").is_boolean());
  }
  EXPECT_EQ(limits, (std::map<std::string, std::string>{
                        {"array_save", "array_write_limit"},
                        {"array_save_h5dwrite", "array_write_limit"},
                        {"array_load", "array_read_limit"},
                        {"array_load_h5dread", "array_read_limit"},
                        {"array_load_fewer_ranks", "array_read_limit_fewer_ranks"},
                        {"array_write_limit", "array_write_limit"},
                        {"array_read_limit", "array_read_limit"},
                        {"array_read_limit_fewer_ranks", "array_read_limit_fewer_ranks"}}));
  for (const auto& row : rows) {
    const auto name = row["name"].get<std::string>();
    if (name == "machine") {
      continue;
    }
    if (name == "array_save" || name == "array_load" || name == "array_load_fewer_ranks") {
      EXPECT_EQ(row.at("target"), 1.25) << name;
      EXPECT_EQ(row.at("met").get<bool>(),
                row["ratio"].get<double>() <= 1.25 && !row.contains("flags"))
          << name;
    } else {
      EXPECT_FALSE(row.contains("target")) << name;
    }
    if (name == "array_save_h5dwrite" || name == "array_load_h5dread") {
      // HDF5 reports the transfer it made; a fallback to independent I/O would show here.
      EXPECT_EQ(row.at("io_mode"), "contiguous collective") << name;
    }
    if (name.find("fewer_ranks") != std::string::npos) {
      EXPECT_EQ(row.at("read_ranks"), 2) << name;
    }
  }
  EXPECT_NE(result.out.find("targets (ratio <= limit):"), std::string::npos) << result.out;
}

// --targets at tiny sizes: every target (save, load, small blobs, commit with a history) is
// measured and printed with its ratio, its limit and MET or NOT MET (which one depends on the
// machine, not checked here). Each goes on past --rounds while its ratio is not stable, as far
// as --max-rounds (a median's interval needs 6 rounds, so with 5 and 6 every one takes 6).
TEST(BenchCommand, TargetsPrintEachTargetWithItsRatioLimitAndVerdict) {
  ScratchDir cwd;
  auto result = bench({"--targets", "--mib-per-rank", "0.25", "--small-blobs", "50", "--history",
                       "12", "--commits", "2", "--rounds", "5", "--max-rounds", "6", "--json", "F",
                       "--dir", "work", "--history-dir", "history"},
                      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work"));
  EXPECT_FALSE(std::filesystem::exists(cwd / "history"));
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  EXPECT_NE(result.out.find("targets (ratio <= limit):"), std::string::npos) << result.out;
  std::map<std::string, double> targets;
  for (const auto& row : rows) {
    if (row.contains("target")) {
      ASSERT_TRUE(row.at("met").is_boolean()) << row;
      EXPECT_EQ(row["met"].get<bool>(), row["ratio"].get<double>() <= row["target"].get<double>() &&
                                            !row.contains("flags"));
      targets[row["name"].get<std::string>()] = row["target"].get<double>();
      expect_ratio_figures(row, 6, 6);
      const auto verdict = row["met"].get<bool>()  ? "  MET"
                           : row.contains("flags") ? "  FLAGGED"
                                                   : "  NOT MET";
      char line[128];
      std::snprintf(line, sizeof line, "  %-20s ratio %6.3f  limit %4.2f%s\n",
                    row["name"].get<std::string>().c_str(), row["ratio"].get<double>(),
                    row["target"].get<double>(), verdict);
      EXPECT_NE(result.out.find(line), std::string::npos) << line << "\n" << result.out;
    }
  }
  EXPECT_EQ(targets, (std::map<std::string, double>{{"save", 1.11},
                                                    {"save_vs_hinted_write", 1.10},
                                                    {"load", 1.25},
                                                    {"save_small_blobs", 2.0},
                                                    {"load_small_blobs", 2.0},
                                                    {"commit_with_history", 1.2}}));
  EXPECT_NE(
      result.out.find("a tiny checkpoint committed (save and index) after 12 committed epochs"),
      std::string::npos);
}

// --help says what each target compares and its limit, in words a user can act on.
TEST(BenchCommand, HelpSaysWhatEachTargetComparesAndItsLimit) {
  ScratchDir cwd;
  auto result = bench({"--help"}, cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The help is wrapped to the terminal's width: compared with single spaces.
  std::string help;
  for (char c : result.out) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      help += c;
    } else if (!help.empty() && help.back() != ' ') {
      help += ' ';
    }
  }
  for (const char* target :
       {"a save of --mib-per-rank in one blob against pwrite + fsync of the same bytes (1.11)",
        "its load against pread into fresh buffers (1.25)",
        "--small-blobs blobs of 1 KiB against the same bytes as one blob, saved and loaded (2)",
        "a commit after --history epochs against one after 10 (1.2)"}) {
    EXPECT_NE(help.find(target), std::string::npos) << target << "\n" << result.out;
  }
  EXPECT_EQ(help.find("issue"), std::string::npos) << result.out;
}

TEST(BenchCommand, BadFlagsExitTwoWithOneLineAndTouchNothing) {
  ScratchDir cwd;
  std::filesystem::create_directory(cwd / "busy");
  write_file(cwd / "busy" / "keep", "mine");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--frobnicate"},
        std::vector<std::string>{"--rounds", "4"},
        std::vector<std::string>{"--mib-per-rank", "0"},
        std::vector<std::string>{"--mib-per-rank", "nan"},
        std::vector<std::string>{"--blobs", "0"},
        std::vector<std::string>{"--mib-per-rank", "0.0001", "--blobs", "1000"},
        std::vector<std::string>{"--dir", "busy"},
        std::vector<std::string>{"--json", "no_such_dir/F", "--dir", "work"},
        std::vector<std::string>{"--targets", "--blobs", "2"},
        std::vector<std::string>{"--targets", "--history", "9"},
        std::vector<std::string>{"--targets", "--history-dir", "busy", "--dir", "work"},
        std::vector<std::string>{"--global-arrays", "--targets"},
        std::vector<std::string>{"--global-arrays", "--blobs", "2"},
        std::vector<std::string>{"--rounds", "6", "--max-rounds", "5"},
        std::vector<std::string>{"--machine-mib", "0"},
        std::vector<std::string>{"--job", "no_such_job"},
        std::vector<std::string>{"--job", "heat_diffusion", "--heat_diffusion.no_such_key", "1"},
        std::vector<std::string>{"--job", "heat_diffusion", "--heat_diffusion.rows", "0"},
        std::vector<std::string>{"--job", "heat_diffusion", "--targets"},
        std::vector<std::string>{"--job", "heat_diffusion", "--num-epochs", "0"},
        std::vector<std::string>{"--heat_diffusion.rows", "64"}}) {
    auto result = bench(args, cwd.path());
    EXPECT_EQ(result.exit_code, 2) << args[0] << "\n" << result.err;
    EXPECT_EQ(error_lines(result).size(), 1U) << args[0] << "\n" << result.err;
  }
  EXPECT_EQ(list_directory(cwd.path()), std::vector<std::string>{"busy"});
  EXPECT_EQ(read_file(cwd / "busy" / "keep"), "mine");
}

// --job: the real job run with synchronous, asynchronous and no checkpoints, each figure there
// and consistent (the save's cost from the same runs' times, the limits of the same bytes, one
// save's phases on every rank from the runs' metrics); which targets are met is the machine's.
TEST(BenchCommand, AJobIsMeasuredWithItsSavesCostItsLimitsAndOneSavesPhases) {
  ScratchDir cwd;
  auto result = bench(
      {"--job", "heat_diffusion", "--heat_diffusion.rows", "96", "--heat_diffusion.columns", "64",
       "--num-epochs", "2", "--rounds", "5", "--max-rounds", "6", "--json", "F", "--dir", "work"},
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  expect_machine_figures(rows.at(0), result.out);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& row : rows) {
    by_name[row.at("name").get<std::string>()] = row;
  }
  const std::map<std::string, std::string> limits = {
      {"job_save", "job_write_limit"},
      {"job_save_vs_hinted_write", "job_write_limit_hinted"},
      {"job_save_vs_direct_write", "job_write_limit_direct"},
      {"job_save_mpiio", "job_write_limit"},
      {"job_save_seconds", "job_write_limit"},
      {"job_async_run", "job_no_checkpoints_run"},
      {"job_sync_run", "job_no_checkpoints_run"},
      {"job_sync_run_mpiio", "job_no_checkpoints_run"},
      {"job_write_limit", "job_write_limit"},
      {"job_write_limit_hinted", "job_write_limit_hinted"},
      {"job_write_limit_direct", "job_write_limit_direct"},
      {"job_no_checkpoints_run", "job_no_checkpoints_run"}};
  for (const auto& [name, limit] : limits) {
    ASSERT_TRUE(by_name.count(name)) << name << " missing from " << rows.dump();
    const auto& row = by_name[name];
    EXPECT_EQ(row.at("limit"), limit) << name;
    EXPECT_EQ(row.at("job"), "heat_diffusion");
    EXPECT_EQ(row.at("epochs"), 2);
    expect_ratio_figures(row, 5, 6);
    EXPECT_TRUE(std::isfinite(row.at("ratio").get<double>())) << row;
    // 96 x 64 float64 cells, the step counter and the largest change: what the limits write.
    EXPECT_GE(row.at("bytes").get<double>(), 96 * 64 * 8) << row;
  }
  // Every measure in the same rounds; the save's cost is the runs' difference per save (3 saves:
  // init and 2 epochs).
  const auto rounds = by_name["job_save"]["rounds"].get<std::size_t>();
  for (std::size_t i = 0; i < rounds; ++i) {
    const double sync = by_name["job_sync_run"]["seconds"][i].get<double>();
    const double none = by_name["job_no_checkpoints_run"]["seconds"][i].get<double>();
    EXPECT_NEAR(by_name["job_save"]["seconds"][i].get<double>(), (sync - none) / 3, 1e-9) << i;
    const double mpiio = by_name["job_sync_run_mpiio"]["seconds"][i].get<double>();
    EXPECT_NEAR(by_name["job_save_mpiio"]["seconds"][i].get<double>(), (mpiio - none) / 3, 1e-9)
        << i;
  }
  for (const char* name :
       {"job_save", "job_save_vs_hinted_write", "job_save_vs_direct_write", "job_async_run"}) {
    const auto& row = by_name[name];
    EXPECT_EQ(row.at("met").get<bool>(),
              row["ratio"].get<double>() <= row["target"].get<double>() && !row.contains("flags"))
        << name;
  }
  // One save's phases on each rank: 3 synchronous saves per run and 2 asynchronous ones (init's
  // and epoch 1's; the last epoch's is synchronous).
  const auto& phases = by_name.at("job_save_phases");
  for (const auto& [kind, saves] : {std::pair<const char*, std::size_t>{"sync", 3},
                                    std::pair<const char*, std::size_t>{"sync_mpiio", 3},
                                    std::pair<const char*, std::size_t>{"async", 2}}) {
    ASSERT_EQ(phases.at(kind).size(), 3u) << phases;
    for (const auto& rank : phases.at(kind)) {
      EXPECT_EQ(rank.at("saves"), saves * rounds) << kind << " " << rank;
      EXPECT_EQ(rank.at("phases").size(), 11u) << rank;
      for (const auto& [phase, seconds] : rank.at("phases").items()) {
        EXPECT_GE(seconds.get<double>(), 0) << phase;
      }
      EXPECT_GT(rank.at("save_seconds").get<double>(), 0) << rank;
    }
  }
  EXPECT_NE(result.out.find("one synchronous save of heat_diffusion by phase"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("targets (ratio <= limit):"), std::string::npos) << result.out;
}

// The rows of the JSON file `file` by name, each of `against` (name: limit) checked there with
// its limit, five rounds' figures and a finite positive ratio.
std::map<std::string, nlohmann::json> rows_against_limits(
    const std::filesystem::path& file, const std::map<std::string, std::string>& against) {
  const auto rows = nlohmann::json::parse(read_file(file));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& row : rows) {
    by_name[row.at("name").get<std::string>()] = row;
  }
  for (const auto& [name, limit] : against) {
    EXPECT_TRUE(by_name.count(name)) << name << " missing from " << rows.dump();
    const auto& row = by_name[name];
    if (row.is_null()) {
      continue;
    }
    EXPECT_EQ(row.at("limit"), limit) << name;
    expect_ratio_figures(row, 5, 5);
    EXPECT_TRUE(std::isfinite(row.at("ratio").get<double>())) << row;
    EXPECT_GT(row.at("ratio").get<double>(), 0) << row;
  }
  return by_name;
}

// --local-dir: the node-local save against the raw write of the same bytes there (and against
// that write hashing what it writes, which against the raw write is the checksum's cost, and
// that write into a new file, which is what the level's spare saves), and with
// --job the run flushing every 10th checkpoint against the one flushing every checkpoint, with the
// bytes each left in the checkpoint directory (fewer); nothing is left behind.
TEST(BenchCommand, TheNodeLocalLevelIsMeasuredAgainstItsRawWriteAndFlushingEveryCheckpoint) {
  ScratchDir cwd;
  auto result = bench(
      {"--local-dir", "L", "--mib-per-rank", "0.25", "--job", "sgd_regression", "--num-epochs",
       "12", "--rounds", "5", "--max-rounds", "5", "--json", "F", "--dir", "work"},
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  EXPECT_FALSE(std::filesystem::exists(cwd / "L")) << "the node-local directory is left behind";
  auto by_name =
      rows_against_limits(cwd / "F", {{"local_save", "local_write_limit"},
                                      {"local_save_over_hashed_write", "local_hashed_write"},
                                      {"local_hashed_write", "local_write_limit"},
                                      {"local_new_file_write", "local_write_limit"},
                                      {"local_write_limit", "local_write_limit"},
                                      {"job_flush_every_10_run", "job_flush_every_1_run"}});
  EXPECT_EQ(by_name["local_save"].at("target"), 1.15);
  EXPECT_FALSE(by_name["local_save_over_hashed_write"].contains("target"));
  const auto& job = by_name["job_flush_every_10_run"];
  EXPECT_GT(job.at("shared_bytes").get<double>(), 0) << job;
  EXPECT_LT(job.at("shared_bytes").get<double>(), job.at("limit_shared_bytes").get<double>())
      << job;
  EXPECT_NE(result.out.find("left in the checkpoint directory"), std::string::npos) << result.out;
}

TEST(BenchCommand, TheRedundancyIsMeasuredAgainstItsTransfersAndAMemoryPass) {
  ScratchDir cwd;
  auto result = bench({"--redundancy", "--mib-per-rank", "0.25", "--rounds", "5", "--max-rounds",
                       "5", "--json", "F", "--dir", "work"},
                      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  auto by_name =
      rows_against_limits(cwd / "F", {{"partner_exchange", "partner_same_work_limit"},
                                      {"partner_exchange_over_transfer", "partner_mpi_limit"},
                                      {"xor_exchange", "xor_same_work_limit"},
                                      {"xor_exchange_over_transfer", "xor_mpi_limit"},
                                      {"xor_encode", "memory_pass_limit"}});
  EXPECT_EQ(by_name["partner_exchange"].at("target"), 1.25);
  EXPECT_EQ(by_name["xor_exchange"].at("target"), 1.25);
  EXPECT_FALSE(by_name["partner_exchange_over_transfer"].contains("target"));
  // Where the exchange's time goes, step by step, on rank 0.
  for (const auto* name : {"partner_exchange", "xor_exchange"}) {
    const auto& steps = by_name[name].at("steps");
    for (const auto* step : {"read", "transfer", "write", "finish"}) {
      ASSERT_TRUE(steps.contains(step)) << name << ": " << steps;
      EXPECT_GE(steps.at(step).get<double>(), 0) << name << ": " << steps;
    }
  }
  EXPECT_NE(result.out.find("partner_exchange: rank 0's median seconds per step: "),
            std::string::npos)
      << result.out;
}

// A ratio is only as good as its limit: a target row whose limit's rounds spread more than twice,
// or a load under 0.8 times its limit, is flagged and not met, whatever its ratio.
TEST(BenchCommand, ARatioWhoseLimitMetTwoMediaIsFlaggedNotMet) {
  const auto row = [](const char* name, double ratio, double limit_min, double limit_max) {
    return nlohmann::json{{"name", name},
                          {"ratio", ratio},
                          {"limit_min_seconds", limit_min},
                          {"limit_max_seconds", limit_max}};
  };
  const auto steady = cli::with_target(row("save", 1.0, 0.5, 0.9), 1.11);
  EXPECT_TRUE(steady.at("met").get<bool>()) << steady;
  EXPECT_FALSE(steady.contains("flags")) << steady;
  const auto spread = cli::with_target(row("save", 1.0, 0.2, 0.5), 1.11);
  EXPECT_FALSE(spread.at("met").get<bool>()) << spread;
  ASSERT_EQ(spread.at("flags").size(), 1U) << spread;
  EXPECT_NE(spread["flags"][0].get<std::string>().find("spread"), std::string::npos) << spread;
  const auto fast_load = cli::with_target(row("array_load_fewer_ranks", 0.35, 0.5, 0.6), 1.25);
  EXPECT_FALSE(fast_load.at("met").get<bool>()) << fast_load;
  ASSERT_EQ(fast_load.at("flags").size(), 1U) << fast_load;
  const auto fast_save = cli::with_target(row("save", 0.7, 0.5, 0.6), 1.11);
  EXPECT_TRUE(fast_save.at("met").get<bool>()) << fast_save;
}

// A disk too small for the checkpoint: one line, exit 1, no hang, and nothing left on it.
TEST(BenchCommand, AFullDiskEndsTheRunWithOneLineAndLeavesNothingBehind) {
  ScratchDir cwd;
  TmpfsMount disk(cwd / "disk", "8m");
  if (!disk.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  auto result = bench({"--mib-per-rank", "4", "--dir", "disk/work"}, cwd.path());
  EXPECT_EQ(result.exit_code, 1) << result.err;
  int error_lines = 0;
  for (const auto& line : result.err_lines()) {
    if (line.rfind("epochrun: error: ", 0) == 0) {
      ++error_lines;
      EXPECT_NE(line.find("space"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(error_lines, 1) << result.err;
  EXPECT_TRUE(list_directory(cwd / "disk").empty());
}

}  // namespace
}  // namespace epochrun::testing
