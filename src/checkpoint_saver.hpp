// Saving an epoch's checkpoint: the save and commit (CheckpointDirectory::save), then the
// post-commit steps; a failed save is recorded and the job goes on (the reference's contract).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/run_summary.hpp"
#include "epochrun/workspace.hpp"
#include "post_commit_steps.hpp"

namespace epochrun {

// What one save did, as this rank saw it.
struct SaveOutcome {
  std::string log;          // "checkpoint epoch-000003.h5 1.2 MiB in ..." or the failure
  double seconds = 0;       // from the start of the save to the end of its post-commit steps
  std::uint64_t bytes = 0;  // this rank's blob bytes
  bool committed = false;
};

class CheckpointSaver {
 public:
  CheckpointSaver(std::string job, const Communicator& comm, const RunOptions& options,
                  std::vector<std::string> node_names, PostCommitSteps& post_commit);

  // What every checkpoint of this run holds: the loaded blobs, or what init created.
  void set_blobs(std::vector<std::string> names) { blobs_ = std::move(names); }
  // The epoch the run resumed from counts as committed (for the checkpoint policy).
  void resumed_from(std::int64_t epoch);

  // Collective: saves `epoch` from `workspace`, commits it and runs the post-commit steps;
  // records the commit or the failure in `summary`. Without a checkpoint directory: nothing.
  SaveOutcome save(std::int64_t epoch, const Workspace& workspace, RunSummary& summary);

  std::optional<std::int64_t> last_committed() const { return last_committed_; }
  std::chrono::steady_clock::time_point last_commit_time() const { return last_commit_time_; }

 private:
  std::string job_;
  const Communicator& comm_;
  const RunOptions& options_;
  std::vector<std::string> node_names_;
  PostCommitSteps& post_commit_;
  std::vector<std::string> blobs_;
  std::optional<std::int64_t> last_committed_;  // by this run, or the epoch it resumed from
  std::chrono::steady_clock::time_point last_commit_time_ = std::chrono::steady_clock::now();
};

}  // namespace epochrun
