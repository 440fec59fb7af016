// The reference's test_download_group_simple: the download group runs between the epoch loop
// and the exit group, and sees the loop's results; here it also receives every node's
// declared outputs, gathered to rank 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "epochrun/epoch_limiter.hpp"
#include "epochrun/job_runner.hpp"

namespace epochrun {
namespace {

TEST(DownloadGroup, RunsBetweenTheLoopAndTheExitGroupWithGatheredOutputs) {
  const auto world = Communicator::world();
  std::vector<std::string> order;
  GatheredBlobs seen_by_download;
  std::map<std::string, std::vector<float>> typed_by_download;
  Job job("download_test");
  add_epoch_limiter(job, 1);
  const auto input1 = job.blob<float>("input1", {8});
  const auto input2 = job.blob<float>("input2", {8});
  const auto output = job.blob<float>("output", {8}, {.output = true});
  const auto download_result = job.blob<float>("download_result", {8});
  job.init_group.add("param_init", [&](TaskContext& context) {
    order.push_back("init");
    for (const auto& blob : {input1, input2, output, download_result}) {
      std::ranges::fill(blob.of(context), 1.0f);
    }
  });
  job.epoch_group.add("add", [&](TaskContext& context) {
    order.push_back("epoch");
    auto out = output.of(context);
    auto a = input1.of(context);
    auto b = input2.of(context);
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = a[i] + b[i] + static_cast<float>(context.comm.rank());
    }
  });
  job.download_group.add("copy", [&](TaskContext& context) {
    order.push_back("download");
    std::ranges::copy(output.of(context), download_result.of(context).begin());
    if (context.has_gathered()) {
      seen_by_download = context.gathered_blobs();
      for (const auto& [node, values] : context.gathered(output)) {
        typed_by_download[node].assign(values.begin(), values.end());
      }
    } else {
      EXPECT_THROW(context.gathered(output), UsageError);
    }
  });
  job.exit_group.add("exit", [&](TaskContext&) { order.push_back("exit"); });

  Workspace workspace;
  RunOptions no_checkpoints;  // as in the reference: a JobRunner without a checkpoint manager
  auto summary = JobRunner(std::move(job), world, no_checkpoints).run(workspace);

  EXPECT_EQ(summary.last_epoch, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"init", "epoch", "download", "exit"}));
  const float expected = 2.0f + static_cast<float>(world.rank());
  for (float value : output.of(workspace)) {
    EXPECT_EQ(value, expected);
  }
  EXPECT_EQ(workspace.get("download_result"), workspace.get("output"));

  if (world.is_root()) {
    ASSERT_EQ(typed_by_download.size(), static_cast<std::size_t>(world.size()));
    for (int rank = 0; rank < world.size(); ++rank) {
      EXPECT_EQ(typed_by_download.at(Job::node_name(rank)),
                std::vector<float>(8, 2.0f + static_cast<float>(rank)));
    }
    EXPECT_EQ(summary.outputs, seen_by_download);
  } else {
    EXPECT_TRUE(seen_by_download.empty());
  }
}

TEST(DownloadGroup, AMissingDeclaredOutputFailsOnEveryRank) {
  const auto world = Communicator::world();
  Job job("missing_output");
  add_epoch_limiter(job, 1);
  job.blob<float>("dropped", {1}, {.output = true});
  job.epoch_group.add("drop", [](TaskContext& context) { context.workspace.erase("dropped"); });
  Workspace workspace;
  EXPECT_THROW(JobRunner(std::move(job), world, RunOptions{}).run(workspace), Error);
}

TEST(TaskGroup, ATaskFailureOnOneRankFailsTheGroupOnAllRanks) {
  const auto world = Communicator::world();
  Job job("failing");
  add_epoch_limiter(job, 3);
  job.epoch_group.add("fails_on_last_rank", [](TaskContext& context) {
    if (context.comm.rank() == context.comm.size() - 1 && context.epoch == 2) {
      throw std::runtime_error("boom");
    }
  });
  Workspace workspace;
  try {
    JobRunner(std::move(job), world, RunOptions{}).run(workspace);
    FAIL() << "expected the failure on every rank";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("boom"), std::string::npos) << message;
    EXPECT_NE(message.find("fails_on_last_rank"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace epochrun
