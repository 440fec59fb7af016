// --no-checkpoints: any job runs without saving, and touches no directory.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

std::optional<ProcessResult> run_bounded(const std::vector<std::string>& args,
                                         const std::filesystem::path& cwd) {
  ChildProcess child(epochrun_on_ranks(3, args), cwd, kMpiEnvironment);
  return child.wait(120);
}

TEST(NoCheckpoints, TheJobRunsToTheEndAndWritesNothingButItsOwnFiles) {
  ScratchDir cwd;
  auto args = small_sgd_regression_options(3);
  args.insert(args.begin(), "run");
  args.insert(args.end(), {"--no-checkpoints", "--summary-json", "s.json"});
  auto result = run_bounded(args, cwd.path());
  ASSERT_TRUE(result.has_value()) << "the run did not end";
  EXPECT_EQ(result->exit_code, 0) << result->err;
  // The job's exported model and the summary asked for; no checkpoint directory, no lock.
  EXPECT_EQ(list_directory(cwd.path()), (std::vector<std::string>{"model.h5", "s.json"}));
  const auto summary = nlohmann::json::parse(read_file(cwd / "s.json"));
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json::array()) << summary;
  EXPECT_EQ(summary["exit_code"], 0) << summary;
}

TEST(NoCheckpoints, AnOptionAboutCheckpointsIsAContradiction) {
  for (const auto& extra : {std::vector<std::string>{"--checkpoint-dir", "D"},
                            {"--resume-from-epoch", "latest"},
                            {"--keep-last", "2"},
                            {"--upload-dir", "U"},
                            {"--delete-checkpoints-on-success"}}) {
    ScratchDir cwd;
    std::vector<std::string> args = {"run", "--job", "sum_pipeline", "--no-checkpoints"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto result = run_bounded(args, cwd.path());
    ASSERT_TRUE(result.has_value()) << extra[0] << ": the run did not end";
    EXPECT_EQ(result->exit_code, 2) << extra[0];
    EXPECT_NE(result->err.find("--no-checkpoints cannot be combined with " + extra[0]),
              std::string::npos)
        << result->err;
    EXPECT_TRUE(list_directory(cwd.path()).empty()) << extra[0];
  }
}

}  // namespace
}  // namespace epochrun::testing
