#include <gtest/gtest.h>

#include <fstream>

#include "run_history_file.hpp"
#include "run_history_json.hpp"
#include "run_summary_json.hpp"
#include "test_support.hpp"

namespace epochrun {
namespace {

TEST(RunSummary, JsonHoldsWhatABatchScriptNeeds) {
  RunSummary summary;
  summary.job = "sum_pipeline";
  summary.num_ranks = 3;
  summary.resumed_from = 2;
  summary.last_epoch = 4;
  summary.epochs_run = 2;
  summary.stop_reason = "stop condition 'reader_exhausted' on every node";
  summary.committed = {3, 4};
  summary.failed_saves = {{5, "disk full"}};
  const std::int64_t total[] = {145};
  summary.outputs["trainer_0"]["total"] = Blob::of<std::int64_t>({1}, total);
  auto json = to_json(summary);
  EXPECT_EQ(json["resumed_from"], 2);
  EXPECT_EQ(json["last_epoch"], 4);
  EXPECT_EQ(json["epochs_run"], 2);
  EXPECT_EQ(json["committed_checkpoints"], nlohmann::json({3, 4}));
  EXPECT_EQ(json["failed_saves"][0]["epoch"], 5);
  EXPECT_EQ(json["failed_saves"][0]["error"], "disk full");
  EXPECT_EQ(json["outputs"]["trainer_0"]["total"]["values"], nlohmann::json({145}));
  EXPECT_TRUE(json["uploaded_to"].is_null());
}

TEST(RunSummary, LargeAndOpaqueBlobsAreSummarizedNotExpanded) {
  auto large = blob_to_json(Blob(DType::kF32, {kSummaryMaxValues + 1}));
  EXPECT_FALSE(large.contains("values"));
  EXPECT_TRUE(large.contains("xxh64"));
  const std::byte raw[] = {std::byte{1}};
  EXPECT_FALSE(blob_to_json(Blob::bytes(raw)).contains("values"));
}

TEST(RunSummary, FromScratchIsNull) {
  EXPECT_TRUE(to_json(RunSummary{})["resumed_from"].is_null());
}

TEST(RunSummary, APreemptedRunSaysWhyWhereToResumeAndItsExitCode) {
  RunSummary summary;
  summary.stop_kind = StopKind::kPreempted;
  summary.stop_reason = "preempted (SIGUSR1 on rank 2)";
  summary.last_committed_epoch = 7;
  summary.exit_code = 75;
  summary.restart_count = 2;
  summary.slurm_job_id = "4711";
  auto json = to_json(summary);
  EXPECT_EQ(json["stop_kind"], "preempted");
  EXPECT_EQ(json["stop_reason"], "preempted (SIGUSR1 on rank 2)");
  EXPECT_EQ(json["last_committed_epoch"], 7);
  EXPECT_EQ(json["exit_code"], 75);
  EXPECT_EQ(json["restart_count"], 2);
  EXPECT_EQ(json["slurm_job_id"], "4711");
  auto empty = to_json(RunSummary{});
  EXPECT_TRUE(empty["last_committed_epoch"].is_null());
  EXPECT_TRUE(empty["slurm_job_id"].is_null());
  EXPECT_EQ(empty["restart_count"], 0);
}

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

TEST(StopDecision, OnlyPreemptionAndTimeLimitInterruptTheJob) {
  for (auto kind : {StopKind::kStopCondition, StopKind::kEpochLimit, StopKind::kAlreadyStopped}) {
    EXPECT_TRUE((StopDecision{kind, "x"}).finishes_job()) << stop_kind_name(kind);
  }
  for (auto kind : {StopKind::kPreempted, StopKind::kTimeLimit}) {
    EXPECT_TRUE((StopDecision{kind, "x"}).interrupted()) << stop_kind_name(kind);
    EXPECT_FALSE((StopDecision{kind, "x"}).finishes_job()) << stop_kind_name(kind);
  }
  EXPECT_FALSE(StopDecision{}.stops());
  EXPECT_EQ(std::string(stop_kind_name(StopKind::kTimeLimit)), "time_limit");
}

}  // namespace
}  // namespace epochrun

#include "epochrun/errors.hpp"
#include "epochrun/logging.hpp"

namespace epochrun {
namespace {

TEST(Logging, EveryDocumentedLevelParses) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::kTrace);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("off"), LogLevel::kOff);
  EXPECT_THROW(parse_log_level("loud"), UsageError);
  EXPECT_THROW(parse_log_level(""), UsageError);
}

}  // namespace
}  // namespace epochrun
