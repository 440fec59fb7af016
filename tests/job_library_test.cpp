// `--job-library FILE`: a library that is missing, is not a job library, or was built for
// another job library ABI is refused with one line and exit code 2, before MPI starts, on
// every rank, and without running any of its code. (A library that loads is run end to end by
// tests/install_test.sh with the kmeans example.)
#include <gtest/gtest.h>

#include "epochrun/job_library.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

ProcessResult epochrun(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                       int ranks) {
  return run_process(epochrun_on_ranks(ranks, args), cwd, kMpiEnvironment);
}

// One error line containing every one of `parts`, exit code 2, no file written.
void expect_refused(const ProcessResult& result, const std::filesystem::path& cwd,
                    const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << result.err;
  const auto lines = error_lines(result);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  for (const auto& part : parts) {
    EXPECT_NE(lines[0].find(part), std::string::npos) << lines[0];
  }
  EXPECT_EQ(result.err.find("registration called"), std::string::npos) << result.err;
  EXPECT_TRUE(list_directory(cwd).empty());
}

class JobLibrary : public ::testing::Test {
 protected:
  ScratchDir cwd_;
};

TEST_F(JobLibrary, ALibraryOfAnotherAbiIsRefusedWithoutRunningItsRegistration) {
  const std::string abi = "ABI " + std::to_string(kJobLibraryAbi + 1);
  expect_refused(
      epochrun({"run", "--job-library", OTHER_ABI_LIBRARY, "--job", "kmeans"}, cwd_.path(), 3),
      cwd_.path(), {OTHER_ABI_LIBRARY, abi, "rebuild it against this epochrun"});
  expect_refused(
      epochrun({"list-jobs", std::string("--job-library=") + OTHER_ABI_LIBRARY}, cwd_.path(), 2),
      cwd_.path(), {OTHER_ABI_LIBRARY, abi});
}

TEST_F(JobLibrary, ALibraryWithoutTheEntryPointIsRefused) {
  expect_refused(
      epochrun({"run", "--job-library", WITHOUT_ENTRY_LIBRARY, "--job", "x"}, cwd_.path(), 3),
      cwd_.path(), {WITHOUT_ENTRY_LIBRARY, "is not an epochrun job library"});
  expect_refused(epochrun({"list-jobs", "--job-library", WITHOUT_ENTRY_LIBRARY}, cwd_.path(), 1),
                 cwd_.path(), {"EPOCHRUN_JOB_LIBRARY"});
}

TEST_F(JobLibrary, AMissingFileOrValueIsAUsageError) {
  expect_refused(epochrun({"run", "--job-library", "libnothere.so", "--job", "x"}, cwd_.path(), 3),
                 cwd_.path(), {"libnothere.so", "does not exist"});
  expect_refused(epochrun({"list-jobs", "--job-library"}, cwd_.path(), 1), cwd_.path(),
                 {"--job-library needs a FILE"});
}

}  // namespace
}  // namespace epochrun::testing
