#include <gtest/gtest.h>

#include "run_summary_json.hpp"

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

}  // namespace
}  // namespace epochrun
