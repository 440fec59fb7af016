// `epochrun bench --verify` as a user runs it: `mpiexec -n 3 epochrun bench --verify ... --json
// F`. Only the report's shape is checked (every row there, sane figures, the targets printed
// with a verdict); its timings decide nothing here.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

ProcessResult bench(const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  std::vector<std::string> full = {"bench", "--verify", "--machine-mib", "1"};
  full.insert(full.end(), args.begin(), args.end());
  return run_within(epochrun_on_ranks(3, full), cwd, 300);
}

void expect_positive(const nlohmann::json& row, const char* key) {
  ASSERT_TRUE(row.contains(key) && row.at(key).is_number()) << key << " in " << row.dump();
  const double value = row.at(key).get<double>();
  EXPECT_TRUE(std::isfinite(value) && value > 0) << key << " = " << value << " in " << row.dump();
}

// Every measure of both media with its floor, each figure a finite positive number and
// consistent with the rounds' seconds; the two targets with their verdicts and flags; nothing
// left behind.
TEST(VerifyBench, MeasuresTheVerificationAgainstItsFloorColdAndWarm) {
  ScratchDir cwd;
  auto result = bench(
      {"--mib-per-rank", "2", "--rounds", "5", "--max-rounds", "6", "--json", "F", "--dir", "work"},
      cwd.path());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_FALSE(std::filesystem::exists(cwd / "work")) << "the working directory is left behind";
  const auto rows = nlohmann::json::parse(read_file(cwd / "F"));
  ASSERT_TRUE(rows.is_array());
  std::vector<std::string> names;
  for (const auto& row : rows) {
    names.push_back(row.at("name").get<std::string>());
  }
  ASSERT_EQ(names, (std::vector<std::string>{
                       "machine", "verify_cold", "verify_warm", "verify_cold_over_8mib_reads",
                       "verify_warm_over_8mib_reads", "verify_floor_cold", "verify_floor_8mib_cold",
                       "verify_floor_warm", "verify_floor_8mib_warm"}))
      << result.out;
  const std::vector<std::string> limits = {"verify_floor_cold",      "verify_floor_warm",
                                           "verify_floor_8mib_cold", "verify_floor_8mib_warm",
                                           "verify_floor_cold",      "verify_floor_8mib_cold",
                                           "verify_floor_warm",      "verify_floor_8mib_warm"};
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("limit"), limits[i - 1]) << row.dump();
    for (const char* key : {"median_seconds", "min_seconds", "max_seconds", "limit_median_seconds",
                            "ratio", "mb_per_second"}) {
      expect_positive(row, key);
    }
    EXPECT_LE(row["min_seconds"].get<double>(), row["median_seconds"].get<double>());
    EXPECT_LE(row["median_seconds"].get<double>(), row["max_seconds"].get<double>());
    const auto rounds = row.at("rounds").get<std::int64_t>();
    EXPECT_GE(rounds, 5) << row.dump();
    EXPECT_LE(rounds, 6) << row.dump();
    EXPECT_EQ(row.at("seconds").size(), std::size_t(rounds)) << row.dump();
    EXPECT_EQ(row.at("ranks"), 3);
    EXPECT_EQ(row.at("mib_per_rank"), 2.0);
    EXPECT_TRUE(row.at("cold").is_boolean());
  }
  // A floor against itself.
  for (std::size_t i = 5; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("ratio"), 1.0) << rows[i].dump();
  }
  for (std::size_t i = 1; i <= 2; ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("target"), 1.25) << row.dump();
    ASSERT_TRUE(row.at("met").is_boolean()) << row.dump();
    // The file holds the three bands of 2 MiB and its metadata.
    EXPECT_GT(row.at("file_bytes").get<double>(), 6.0 * (1 << 20)) << row.dump();
    EXPECT_LT(row.at("file_bytes").get<double>(), 7.0 * (1 << 20)) << row.dump();
    if (row.contains("flags")) {
      EXPECT_FALSE(row.at("met").get<bool>()) << row.dump();
      for (const auto& flag : row.at("flags")) {
        EXPECT_TRUE(flag.is_string()) << row.dump();
      }
    }
    // The same rounds as the row against the larger reads.
    EXPECT_EQ(row.at("seconds"), rows[i + 2].at("seconds"));
  }
  EXPECT_NE(result.out.find("epochrun bench --verify: 3 ranks x 2 MiB"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("targets (ratio <= limit):"), std::string::npos) << result.out;
  for (const char* name : {"  verify_cold ", "  verify_warm "}) {
    EXPECT_NE(result.out.find(name), std::string::npos) << name << "\n" << result.out;
  }
}

TEST(VerifyBench, DoesNotGoWithTheOtherModes) {
  ScratchDir cwd;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--targets"}, std::vector<std::string>{"--global-arrays"},
        std::vector<std::string>{"--redundancy"}, std::vector<std::string>{"--blobs", "2"}}) {
    auto result = bench(args, cwd.path());
    EXPECT_EQ(result.exit_code, 2) << args[0] << "\n" << result.err;
    EXPECT_EQ(error_lines(result).size(), 1U) << args[0] << "\n" << result.err;
  }
  EXPECT_TRUE(list_directory(cwd.path()).empty());
}

}  // namespace
}  // namespace epochrun::testing
