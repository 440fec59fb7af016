// Running the reference pipeline in tests.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>

#include "checkpoint_file_collective.hpp"
#include "epochrun/job_runner.hpp"
#include "sum_pipeline.hpp"

namespace epochrun::testing {

// The reference test's EXPECTED_TOTALS: the total after epochs 1..4.
inline constexpr std::array<std::int64_t, 4> kExpectedTotals = {103, 115, 136, 145};

inline std::int64_t total_of(const Workspace& workspace) {
  return workspace.get(jobs::kSumTotal).as<std::int64_t>()[0];
}

inline RunOptions options_for(const std::filesystem::path& checkpoint_dir,
                              ResumeRequest resume = ResumeRequest::from_scratch()) {
  RunOptions options;
  options.checkpoint_dir = checkpoint_dir;
  options.resume = resume;
  return options;
}

// Runs sum_pipeline on `comm` into `workspace`; collective.
inline RunSummary run_sum_pipeline(const Communicator& comm, RunOptions options,
                                   Workspace& workspace) {
  return JobRunner(jobs::make_sum_pipeline(), comm, std::move(options)).run(workspace);
}

inline CheckpointExpectation sum_pipeline_expectation(const Communicator& comm,
                                                      std::int64_t epoch) {
  CheckpointExpectation expected{epoch, "sum_pipeline", {}};
  for (int rank = 0; rank < comm.size(); ++rank) {
    expected.node_names.push_back(Job::node_name(rank));
  }
  return expected;
}

}  // namespace epochrun::testing
