// The metrics JSON lines (README "Metrics"): a small run, a resumed one after a torn last line,
// and what every line holds.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

ProcessResult run_bounded(const std::vector<std::string>& args, const std::filesystem::path& cwd) {
  return run_within(epochrun_on_ranks(3, args), cwd, 120);
}

TEST(Metrics, EveryEpochAndLoadHasEveryRanksFiguresAndATornLineIsEnded) {
  ScratchDir cwd;
  const std::vector<std::string> sum = {
      "run", "--job",       "sum_pipeline", "--checkpoint-dir", "D", "--checkpoint-every",
      "2",   "--log-level", "warn"};
  auto first = run_bounded(sum, cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // A run killed inside an append.
  {
    std::ofstream torn(cwd / "D" / "metrics.jsonl", std::ios::app);
    torn << R"({"run_started":"2026-01-01T00:00:00Z","event":"ep)";
  }
  auto args = sum;
  args.insert(args.end(), {"--resume-from-epoch", "2"});
  auto resumed = run_bounded(args, cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;

  std::vector<nlohmann::json> records;
  int unreadable = 0;
  for (const auto& line : lines_of(cwd / "D" / "metrics.jsonl")) {
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) {
      ++unreadable;
    } else {
      records.push_back(record);
    }
  }
  EXPECT_EQ(unreadable, 1) << "only the torn line is unreadable";
  // First run: epochs 0 to 4 (0 init, saved; 2 and 4 saved; 1 and 3 skipped by the policy).
  // Resumed run: the load of epoch 2, then epochs 3 (skipped) and 4 (saved).
  std::vector<std::pair<std::string, std::int64_t>> events;
  std::set<std::string> runs;
  for (const auto& record : records) {
    events.emplace_back(record["event"], record["epoch"]);
    runs.insert(record["run_started"].get<std::string>());
    ASSERT_EQ(record["ranks"].size(), 3u) << record;
    for (int rank = 0; rank < 3; ++rank) {
      const auto& figures = record["ranks"][rank];
      EXPECT_EQ(figures["rank"], rank);
      EXPECT_GT(figures["peak_rss_bytes"].get<double>(), 0) << record;
      if (record["event"] == "load") {
        EXPECT_GE(figures["load_seconds"].get<double>(), 0) << record;
        EXPECT_GT(figures["load_bytes"].get<double>(), 0) << record;
        continue;
      }
      EXPECT_GE(figures["epoch_seconds"].get<double>(), 0) << record;
      const bool saved = record["epoch"].get<std::int64_t>() % 2 == 0;
      EXPECT_EQ(figures.contains("save_seconds"), saved) << record;
      EXPECT_EQ(figures.contains("save_bytes"), saved) << record;
      EXPECT_EQ(figures.contains("blocked_seconds"), saved) << record;
      if (saved) {
        EXPECT_GT(figures["save_bytes"].get<double>(), 0) << record;
        // A synchronous save blocks the job for all of its time.
        EXPECT_EQ(figures["blocked_seconds"], figures["save_seconds"]) << record;
        // Where that time went, phase by phase: within the save, none left out.
        double phases = 0;
        for (const char* phase : {"snapshot", "describe", "lay_out", "write", "hash", "fsync",
                                  "checksums", "commit", "post_commit", "waiting", "redundancy"}) {
          ASSERT_TRUE(figures["save_phases"][phase].is_number()) << phase << " in " << record;
          EXPECT_GE(figures["save_phases"][phase].get<double>(), 0) << phase << " in " << record;
          phases += figures["save_phases"][phase].get<double>();
        }
        EXPECT_EQ(figures["save_phases"].size(), 11u) << record;
        EXPECT_LE(phases, figures["save_seconds"].get<double>() + 1e-3) << record;
        EXPECT_GT(phases, 0) << record;
        EXPECT_TRUE(figures["save_minor_faults"].is_number_unsigned()) << record;
        EXPECT_TRUE(figures["save_major_faults"].is_number_unsigned()) << record;
      } else {
        EXPECT_FALSE(figures.contains("save_phases")) << record;
      }
    }
  }
  const std::vector<std::pair<std::string, std::int64_t>> expected = {
      {"epoch", 0}, {"epoch", 1}, {"epoch", 2}, {"epoch", 3},
      {"epoch", 4}, {"load", 2},  {"epoch", 3}, {"epoch", 4}};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(runs.size(), 2u);
}

// A FIFO under the run history's or the metrics' name in the checkpoint directory (nothing
// writes into it, so opening or reading it would wait forever): the run is never held by it,
// says in a warning line that the file is not a regular file, and commits its checkpoints;
// inspect lists the directory. Before, the run waited on the FIFO until the bound killed it.
TEST(Metrics, AFifoUnderTheRunHistoryOrTheMetricsNameIsNeverWaitedOn) {
  for (const auto* name : {"runs.jsonl", "metrics.jsonl"}) {
    ScratchDir cwd;
    std::filesystem::create_directory(cwd / "D");
    ASSERT_EQ(::mkfifo((cwd / "D" / name).c_str(), 0600), 0);
    auto result = run_bounded({"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                               "--checkpoint-every", "2", "--log-level", "warn"},
                              cwd.path());
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.err;
    EXPECT_NE(result.err.find("not a regular file"), std::string::npos) << name << result.err;
    EXPECT_TRUE(std::filesystem::exists(cwd / "D" / "epoch-000004.h5")) << name;
    auto inspected = run_within({EPOCHRUN_BINARY, "inspect", "D"}, cwd.path(), 60);
    EXPECT_EQ(inspected.exit_code, 0) << name << ": " << inspected.err;
  }
}

}  // namespace
}  // namespace epochrun::testing
