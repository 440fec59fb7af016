// The small sgd_regression run that the tests of a save's variants (--async-checkpoint,
// --local-dir) repeat and compare with the synchronous run's checkpoints: 3 ranks, epochs 0 to
// kSmallSgdLastEpoch, checkpoints in D under the run's directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {

inline constexpr std::int64_t kSmallSgdLastEpoch = 5;
// Each run here takes a few seconds; one that has not ended by then fails its test.
inline constexpr double kSmallSgdRunSeconds = 120;

// The run, with `extra` after the job's options.
inline std::vector<std::string> small_sgd(const std::vector<std::string>& extra) {
  return small_sgd_regression_run(3, kSmallSgdLastEpoch, extra);
}

// Runs `argv` in `cwd` within kSmallSgdRunSeconds.
inline ProcessResult run_bounded(
    const std::vector<std::string>& argv, const std::filesystem::path& cwd,
    const std::map<std::string, std::string>& environment = kMpiEnvironment) {
  return run_within(argv, cwd, kSmallSgdRunSeconds, environment);
}

// Every value of the checkpoint of `epoch` in `cwd`/D.
inline CheckpointContents epoch_of(const std::filesystem::path& cwd, std::int64_t epoch) {
  return read_checkpoint_contents(CheckpointDirectory(cwd / "D").file_for(epoch));
}

// A test suite whose cases compare with one synchronous run of small_sgd({}), made once for
// the suite in sync_.
class ComparedWithSynchronousRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sync_ = new ScratchDir();
    auto result = run_bounded(small_sgd({}), sync_->path());
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    delete sync_;
    sync_ = nullptr;
  }

  static inline ScratchDir* sync_ = nullptr;
};

}  // namespace epochrun::testing
