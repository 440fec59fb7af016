// The reference's test_download_group_simple: the download group runs between the epoch loop
// and the exit group, and sees the loop's results; here it also receives every node's
// declared outputs, gathered to rank 0.
#include <gtest/gtest.h>

#include "epochrun/epoch_limiter.hpp"
#include "epochrun/job_runner.hpp"

namespace epochrun {
namespace {

Blob ones(std::uint64_t count) {
  Blob blob(DType::kF32, {count});
  for (auto& value : blob.as<float>()) {
    value = 1.0f;
  }
  return blob;
}

TEST(DownloadGroup, RunsBetweenTheLoopAndTheExitGroupWithGatheredOutputs) {
  const auto world = Communicator::world();
  std::vector<std::string> order;
  GatheredBlobs seen_by_download;
  Job job("download_test");
  add_epoch_limiter(job, 1);
  job.init_group.add("param_init", [&](TaskContext& context) {
    order.push_back("init");
    for (const char* name : {"input1", "input2", "output", "download_result"}) {
      context.workspace.put(name, ones(8));
    }
  });
  job.epoch_group.add("add", [&](TaskContext& context) {
    order.push_back("epoch");
    auto& ws = context.workspace;
    auto out = ws.get("output").as<float>();
    auto a = ws.get("input1").as<float>();
    auto b = ws.get("input2").as<float>();
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = a[i] + b[i] + static_cast<float>(context.comm.rank());
    }
  });
  job.declare_output("output");
  job.download_group.add("copy", [&](TaskContext& context) {
    order.push_back("download");
    context.workspace.put("download_result", context.workspace.get("output"));
    if (context.downloaded != nullptr) {
      seen_by_download = *context.downloaded;
    }
  });
  job.exit_group.add("exit", [&](TaskContext&) { order.push_back("exit"); });

  Workspace workspace;
  RunOptions no_checkpoints;  // as in the reference: a JobRunner without a checkpoint manager
  auto summary = JobRunner(std::move(job), world, no_checkpoints).run(workspace);

  EXPECT_EQ(summary.last_epoch, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"init", "epoch", "download", "exit"}));
  const float expected = 2.0f + static_cast<float>(world.rank());
  for (float value : workspace.get("output").as<float>()) {
    EXPECT_EQ(value, expected);
  }
  EXPECT_EQ(workspace.get("download_result"), workspace.get("output"));

  if (world.is_root()) {
    ASSERT_EQ(seen_by_download.size(), static_cast<std::size_t>(world.size()));
    for (int rank = 0; rank < world.size(); ++rank) {
      const auto& output = seen_by_download.at(Job::node_name(rank)).at("output");
      for (float value : output.as<float>()) {
        EXPECT_EQ(value, 2.0f + static_cast<float>(rank));
      }
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
  job.declare_output("never_created");
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
