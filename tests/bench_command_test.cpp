// `epochrun bench` as a user runs it: `mpiexec -n 3 epochrun bench ... --json F`. Only the
// report's shape is checked; its timings decide nothing here.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// `epochrun bench args...` on 3 ranks in `cwd`; fails the test when it runs over 5 minutes.
ProcessResult bench(const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  std::vector<std::string> full = {"bench"};
  full.insert(full.end(), args.begin(), args.end());
  ChildProcess child(epochrun_on_ranks(3, full), cwd, kMpiEnvironment);
  auto result = child.wait(300);
  if (!result) {
    ADD_FAILURE() << "epochrun bench did not end within 5 minutes";
    return {};
  }
  return *result;
}

TEST(BenchCommand, WritesOneJsonObjectPerMeasureWithFinitePositiveRatios) {
  ScratchDir cwd;
  auto result = bench(
      {"--mib-per-rank", "1", "--rounds", "5", "--blobs", "4", "--json", "F", "--dir", "work"},
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("save"), std::string::npos) << result.out;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";

  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  ASSERT_TRUE(rows.is_array());
  std::vector<std::string> names;
  for (const auto& row : rows) {
    names.push_back(row.at("name").get<std::string>());
    if (!row.contains("ratio")) {
      continue;  // a memory row (below)
    }
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
    EXPECT_EQ(row.at("rounds"), 5);
    EXPECT_EQ(row.at("seconds").size(), 5u);
    EXPECT_TRUE(row.at("cold").is_boolean());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"save", "load", "write_limit", "read_limit",
                                             "save_memory", "load_memory"}));
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
  std::map<std::string, std::string> limits;
  for (const auto& row : rows) {
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
    if (name == "array_save" || name == "array_load" || name == "array_load_fewer_ranks") {
      EXPECT_EQ(row.at("target"), 1.25) << name;
      EXPECT_EQ(row.at("met").get<bool>(), row["ratio"].get<double>() <= 1.25) << name;
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
// machine, not checked here).
TEST(BenchCommand, TargetsPrintEachTargetWithItsRatioLimitAndVerdict) {
  ScratchDir cwd;
  auto result =
      bench({"--targets", "--mib-per-rank", "0.25", "--small-blobs", "50", "--history", "12",
             "--commits", "2", "--json", "F", "--dir", "work", "--history-dir", "history"},
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
      EXPECT_EQ(row["met"].get<bool>(), row["ratio"].get<double>() <= row["target"].get<double>());
      targets[row["name"].get<std::string>()] = row["target"].get<double>();
      const auto verdict = row["met"].get<bool>() ? "  MET" : "  NOT MET";
      char line[128];
      std::snprintf(line, sizeof line, "  %-20s ratio %6.3f  limit %4.2f%s\n",
                    row["name"].get<std::string>().c_str(), row["ratio"].get<double>(),
                    row["target"].get<double>(), verdict);
      EXPECT_NE(result.out.find(line), std::string::npos) << line << "\n" << result.out;
    }
  }
  EXPECT_EQ(targets, (std::map<std::string, double>{{"save", 1.11},
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
       {std::vector<std::string>{"--frobnicate"}, std::vector<std::string>{"--rounds", "4"},
        std::vector<std::string>{"--mib-per-rank", "0"},
        std::vector<std::string>{"--mib-per-rank", "nan"}, std::vector<std::string>{"--blobs", "0"},
        std::vector<std::string>{"--mib-per-rank", "0.0001", "--blobs", "1000"},
        std::vector<std::string>{"--dir", "busy"},
        std::vector<std::string>{"--json", "no_such_dir/F", "--dir", "work"},
        std::vector<std::string>{"--targets", "--blobs", "2"},
        std::vector<std::string>{"--targets", "--history", "9"},
        std::vector<std::string>{"--targets", "--history-dir", "busy", "--dir", "work"},
        std::vector<std::string>{"--global-arrays", "--targets"},
        std::vector<std::string>{"--global-arrays", "--blobs", "2"}}) {
    auto result = bench(args, cwd.path());
    EXPECT_EQ(result.exit_code, 2) << args[0] << "\n" << result.err;
    int error_lines = 0;
    for (const auto& line : result.err_lines()) {
      error_lines += line.rfind("epochrun: error: ", 0) == 0 ? 1 : 0;
    }
    EXPECT_EQ(error_lines, 1) << args[0] << "\n" << result.err;
  }
  EXPECT_EQ(list_directory(cwd.path()), std::vector<std::string>{"busy"});
  EXPECT_EQ(read_file(cwd / "busy" / "keep"), "mine");
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
