// The checkpoint manager's insides (epochrun/checkpoint_manager.hpp), which the runner saves and
// resumes through: the directory's lock and start-up checks, the post-commit steps, the saver
// and the metrics, in the order a run needs them. Internal to the library.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_options.hpp"
#include "checkpoint_saver.hpp"
#include "directory_lock.hpp"
#include "epochrun/checkpoint_manager.hpp"
#include "epochrun/export.hpp"
#include "post_commit_steps.hpp"
#include "resume.hpp"
#include "run_metrics.hpp"

namespace epochrun {

// What the checkpoint layer takes of the run's options.
CheckpointOptions checkpoint_options(const RunOptions& options);

struct EPOCHRUN_HIDDEN CheckpointManager::Impl {
  // Collective on `comm`, which must outlive it: the lock and the checks first, then the steps.
  Impl(const Job& arrays, const Communicator& comm, const RunOptions& options,
       std::chrono::system_clock::time_point started);

  // Collective: the resume decision and the load (resume()), recorded in `summary`; the saver
  // then saves what was loaded.
  std::optional<Resumed> restore(const ResumeRequest& request, Workspace& workspace,
                                 RunSummary& summary);
  // The saver saves the arrays of `names` from now on (what init created, or what was loaded).
  void save_arrays(const std::vector<std::string>& names);

  Job arrays;
  const Communicator& comm;
  RunOptions options;
  std::vector<std::string> node_names;
  // Held by rank 0 while the manager lives: nothing below may run twice on one directory.
  std::unique_ptr<DirectoryLock> lock;
  CheckpointOptions checkpointing;
  PostCommitSteps post_commit;
  CheckpointSaver saver;
  RunMetrics metrics;
  // The manager's own (the runner keeps its summary): what restores found.
  RunSummary summary;
  std::vector<std::string> saved_names;  // what the saver saves (save_arrays)
};

}  // namespace epochrun
