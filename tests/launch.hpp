// How the process-level tests launch the program: `mpiexec -n N --oversubscribe epochrun ...`
// with what Open MPI needs to run as root. Header-only because MPIEXEC_BINARY and
// EPOCHRUN_BINARY are compile definitions of the process-level test targets.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace epochrun::testing {

inline const std::map<std::string, std::string> kMpiEnvironment = {
    {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
    {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
    {"OMPI_MCA_rmaps_base_oversubscribe", "1"}};

// kMpiEnvironment plus EPOCHRUN_FAULT=`fault` (docs/TESTING.md).
inline std::map<std::string, std::string> with_fault(const std::string& fault) {
  auto environment = kMpiEnvironment;
  environment["EPOCHRUN_FAULT"] = fault;
  return environment;
}

// Runs `argv` in `cwd` with `environment`, waiting at most `timeout_seconds`: one that does not
// end by then fails the test (it is killed) and gives an empty result.
inline ProcessResult run_within(
    const std::vector<std::string>& argv, const std::filesystem::path& cwd, double timeout_seconds,
    const std::map<std::string, std::string>& environment = kMpiEnvironment) {
  ChildProcess child(argv, cwd, environment);
  auto result = child.wait(timeout_seconds);
  if (!result) {
    ADD_FAILURE() << argv[0] << " did not end within " << timeout_seconds << " s";
    return {};
  }
  return *result;
}

// mpiexec's arguments for `ranks` ranks, to be followed by the program and its arguments.
inline std::vector<std::string> mpiexec_prefix(int ranks) {
  return {MPIEXEC_BINARY, "-n", std::to_string(ranks), "--oversubscribe"};
}

// `epochrun args...` on `ranks` ranks.
inline std::vector<std::string> epochrun_on_ranks(int ranks, const std::vector<std::string>& args) {
  auto argv = mpiexec_prefix(ranks);
  argv.push_back(EPOCHRUN_BINARY);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The options of a small sgd_regression that runs exactly `max_epochs` epochs (a few ms each):
// what the process-level tests run when they need a real job.
inline std::vector<std::string> small_sgd_regression_options(std::int64_t max_epochs) {
  return {"--job",
          "sgd_regression",
          "--log-level",
          "warn",
          "--sgd_regression.features",
          "4",
          "--sgd_regression.samples",
          "1024",
          "--sgd_regression.batches_per_epoch",
          "32",
          "--sgd_regression.max_epochs",
          std::to_string(max_epochs),
          "--sgd_regression.loss_threshold",
          "0",
          "--sgd_regression.model_file",
          "model.h5"};
}

// `epochrun run` of small_sgd_regression_options(max_epochs) on `ranks` ranks, checkpoints in
// D, `extra` after the job's options (a --log-level there replaces the default one).
inline std::vector<std::string> small_sgd_regression_run(int ranks, std::int64_t max_epochs,
                                                         const std::vector<std::string>& extra) {
  auto args = small_sgd_regression_options(max_epochs);
  if (std::find(extra.begin(), extra.end(), "--log-level") != extra.end()) {
    const auto level = std::find(args.begin(), args.end(), "--log-level");
    args.erase(level, level + 2);
  }
  args.insert(args.begin(), {"run", "--checkpoint-dir", "D"});
  args.insert(args.end(), extra.begin(), extra.end());
  return epochrun_on_ranks(ranks, args);
}

}  // namespace epochrun::testing
