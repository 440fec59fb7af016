// A checkpoint directory that is not the same directory on every rank is refused before the
// first epoch: exit code 3, one line naming the ranks that do not see it, nothing committed
// changed, no probe file left. The ranks here really see different directories: the same
// relative --checkpoint-dir, rank 0 started in one working directory and ranks 1 and 2 in
// another (mpiexec's --wdir per application context), as a node-local path does across hosts.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// Every file of a directory and its bytes.
std::map<std::string, std::string> snapshot(const std::filesystem::path& directory) {
  std::map<std::string, std::string> files;
  for (const auto& name : list_directory(directory)) {
    files[name] = read_file(directory / name);
  }
  return files;
}

// `epochrun args...` with rank 0 started in `rank_0_in` and ranks 1 and 2 in `others_in`.
std::vector<std::string> split_between(const std::filesystem::path& rank_0_in,
                                       const std::filesystem::path& others_in,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MPIEXEC_BINARY, "--oversubscribe",  "-n",           "1",
                                   "--wdir",       rank_0_in.string(), EPOCHRUN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {":", "-n", "2", "--wdir", others_in.string(), EPOCHRUN_BINARY});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The line of a refused run, checked for what every refusal says.
void expect_refused(const ProcessResult& refused) {
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  const auto lines = error_lines(refused);
  ASSERT_EQ(lines.size(), 1u) << refused.err;
  EXPECT_NE(lines[0].find("checkpoint directory D is not the same directory on every rank"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("rank 1 on "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("rank 2 on "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("No such file or directory"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("rank 0 on "), std::string::npos) << lines[0];
}

// Without the check this run saved every epoch in vain (ranks 1 and 2 found no file to write
// into) and ended with exit code 0 and nothing committed.
TEST(SharedDirectoryCheck, AFreshRunIsRefusedInsteadOfRunningWithoutCheckpoints) {
  ScratchDir cwd;
  std::filesystem::create_directories(cwd / "A");
  std::filesystem::create_directories(cwd / "B");
  const auto refused =
      run_within(split_between(cwd / "A", cwd / "B",
                               {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D"}),
                 cwd.path(), 120);
  expect_refused(refused);
  EXPECT_EQ(list_directory(cwd / "A" / "D"), std::vector<std::string>{".epochrun.lock"});
  EXPECT_TRUE(list_directory(cwd / "B").empty());
}

TEST(SharedDirectoryCheck, AResumeIsRefusedBeforeItReadsAndNothingCommittedChanges) {
  ScratchDir cwd;
  std::filesystem::create_directories(cwd / "A");
  std::filesystem::create_directories(cwd / "B");
  const std::vector<std::string> args = {
      "run", "--job", "sum_pipeline", "--checkpoint-dir", "D", "--resume-from-epoch", "latest"};
  // A run whose ranks all see A/D: it commits epochs 0 to 4 there.
  std::vector<std::string> shared = {MPIEXEC_BINARY,    "-n",     "3",
                                     "--oversubscribe", "--wdir", (cwd / "A").string(),
                                     EPOCHRUN_BINARY};
  shared.insert(shared.end(), args.begin(), args.end());
  const auto first = run_within(shared, cwd.path(), 120);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto before = snapshot(cwd / "A" / "D");
  ASSERT_EQ(before.count("epoch-000004.h5"), 1u);

  // Rank 0 in A, ranks 1 and 2 in B: D is A/D for rank 0 and B/D for the others.
  const auto refused = run_within(split_between(cwd / "A", cwd / "B", args), cwd.path(), 120);
  expect_refused(refused);
  EXPECT_EQ(refused.err.find("epoch 5"), std::string::npos) << refused.err;
  // Nothing of A/D changed (the probe is gone again), and ranks 1 and 2 wrote nothing.
  EXPECT_EQ(snapshot(cwd / "A" / "D"), before);
  EXPECT_TRUE(list_directory(cwd / "B").empty());
}

}  // namespace
}  // namespace epochrun::testing
