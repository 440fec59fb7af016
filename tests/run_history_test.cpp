#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "epochrun/run_history.hpp"
#include "epochrun/run_summary.hpp"
#include "run_history_file.hpp"
#include "run_history_json.hpp"
#include "test_support.hpp"

namespace epochrun {
namespace {

// runs.jsonl read back typed: a record written by append_run_record reads back equal; a torn
// line, a line with a field of the wrong type are skipped; fields a newer epochrun added are
// ignored.
TEST(RunHistory, RecordsReadBackTypedAndDamagedLinesAreSkipped) {
  testing::ScratchDir directory;
  RunSummary summary;
  summary.num_ranks = 3;
  summary.resumed_from = 4;
  summary.stop_kind = StopKind::kPreempted;
  summary.exit_code = 75;
  const auto now = std::chrono::system_clock::now();
  const auto record = run_record(summary, now, now);
  append_run_record(directory.path(), record);
  {
    std::ofstream out(directory.path() / kRunHistoryFileName, std::ios::app);
    out << R"({"ranks":"three"})"
        << "\n"
        << R"({"ranks":2,"exit_code":0,"a_newer_field":[1,2]})"
        << "\n"
        << R"({"ranks":3,"exit)";
  }
  const auto history = read_run_history(directory.path());
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0], record);
  EXPECT_EQ(history[0].stop_kind, "preempted");
  EXPECT_EQ(history[1].ranks, 2);
  EXPECT_FALSE(history[1].resumed_from.has_value());
  EXPECT_EQ(nlohmann::json(history[0])["resumed_from"], 4);
}

}  // namespace
}  // namespace epochrun
