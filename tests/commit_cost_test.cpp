// What a commit costs must not grow with the epochs already in the directory. A cost in time
// would make a flaky test, so the test counts what made it grow: directory listings and stats
// of older checkpoint files, watched with strace. A run of 2 epochs and one of 12 into a
// directory that already holds 300 committed epochs must list the directory and stat those
// files exactly as often (once, when the run starts), with the retention policy and the index
// updated after every commit.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "epochrun/checkpoint_directory.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr int kHistory = 300;
constexpr std::int64_t kFirstOldEpoch = 1000;

struct Counts {
  int listings = 0;   // getdents64 calls on the checkpoint directory
  int old_stats = 0;  // stat-family calls naming one of the older checkpoints
};

// Runs `epochs` epochs of sum_pipeline under strace into a directory holding kHistory committed
// epochs after the ones the run writes (never the retention's to delete: they are newer).
Counts run_counting(int epochs) {
  ScratchDir cwd;
  const auto directory = cwd / "D";
  std::filesystem::create_directories(directory);
  for (int i = 0; i < kHistory; ++i) {
    write_file(directory / checkpoint_file_name(kFirstOldEpoch + i), "an older checkpoint");
  }
  const auto trace = cwd / "trace";
  ChildProcess run({STRACE_BINARY,
                    "-f",
                    "-y",
                    "-qq",
                    "-e",
                    "trace=getdents64,stat,lstat,newfstatat,statx",
                    "-o",
                    trace.string(),
                    EPOCHRUN_BINARY,
                    "run",
                    "--job",
                    "sum_pipeline",
                    "--checkpoint-dir",
                    "D",
                    "--sum_pipeline.num_items",
                    "12",
                    "--sum_pipeline.items_per_epoch",
                    "1",
                    "--num-epochs",
                    std::to_string(epochs),
                    "--keep-last",
                    "100000",
                    "--log-level",
                    "warn"},
                   cwd.path(), kMpiEnvironment);
  auto result = run.wait(120);
  EXPECT_TRUE(result.has_value()) << "the run did not end";
  if (!result) {
    return {};
  }
  EXPECT_EQ(result->exit_code, 0) << result->err;
  EXPECT_EQ(CheckpointDirectory(directory).committed_epochs().size(),
            static_cast<std::size_t>(kHistory + epochs + 1));
  Counts counts;
  const auto listed = "<" + std::filesystem::canonical(directory).string() + ">";
  std::istringstream lines(read_file(trace));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("getdents64(") != std::string::npos && line.find(listed) != std::string::npos) {
      ++counts.listings;
    } else if (line.find("getdents64(") == std::string::npos &&
               line.find("epoch-001") != std::string::npos) {
      ++counts.old_stats;
    }
  }
  return counts;
}

TEST(CommitCost, ListingsAndStatsOfOlderCheckpointsDoNotGrowWithCommits) {
  const auto two = run_counting(2);
  const auto twelve = run_counting(12);
  EXPECT_GT(two.listings, 0);
  EXPECT_EQ(twelve.listings, two.listings) << "directory listings grow with the commits";
  EXPECT_EQ(twelve.old_stats, two.old_stats) << "older checkpoints are stat'ed at every commit";
  EXPECT_LE(two.old_stats, kHistory) << "more than one stat per older checkpoint";
}

}  // namespace
}  // namespace epochrun::testing
