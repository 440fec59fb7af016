// A checkpoint manager for a loop of one's own, as Orbax's CheckpointManager,
// tf.train.CheckpointManager and torch.distributed.checkpoint offer it: open it on a
// communicator and a checkpoint directory, restore the newest checkpoint at the start, save
// after each step worth keeping. It is what `epochrun run` saves and resumes through, with the
// same commit protocol, judge, index, metrics, retention, node-local level and redundancy.
//
//   epochrun::Job arrays("my_loop");                       // what a checkpoint holds
//   auto u = arrays.global_array<double>("u", {1024, 1024});
//   epochrun::RunOptions options;
//   options.checkpoint_dir = "ck";
//   options.async_checkpoint = true;
//   epochrun::CheckpointManager manager(arrays, comm, options);
//   epochrun::Workspace workspace;
//   auto step = manager.restore(epochrun::ResumeRequest::latest(), workspace);  // or create
//   for (std::int64_t epoch = step ? step->epoch + 1 : 1; epoch <= 100; ++epoch) {
//     ...                                                  // your step, on u.of(workspace)
//     manager.save(epoch, workspace);                      // returns at once when async
//   }
//   manager.wait();                                        // commits the save in flight
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/export.hpp"
#include "epochrun/job.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// What one save did, or one step of an asynchronous one.
struct SaveResult {
  std::int64_t epoch = 0;
  bool committed = false;   // committed to the checkpoint directory
  bool node_local = false;  // saved node-local only (--local-dir levels), committed by its manifest
  bool in_background = false;          // still being written beside the caller: wait() commits it
  std::optional<std::string> failure;  // why the save failed (nothing committed is touched)
  double seconds = 0;                  // the whole save
  double blocked_seconds = 0;          // of those, the caller's thread waited
  std::uint64_t bytes = 0;             // this rank's array bytes
};

// What a restore loaded.
struct Restored {
  std::int64_t epoch = 0;
  std::int64_t written_by_ranks = 0;  // the rank count that saved it (global arrays reshard)
  bool node_local = false;            // from the node-local copies of an epoch not flushed
  std::vector<std::string> arrays;    // the names loaded
};

class EPOCHRUN_API CheckpointManager {
 public:
  // Collective on `comm` (duplicated: the manager's messages never meet the caller's).
  // `arrays` declares what a checkpoint holds (Job's blob declarations: per node, replicated,
  // global arrays with their decomposition; its task groups are not used). Of `options`, the
  // checkpointing fields apply (checkpoint_dir, config_json, retention, uploader, save_timeout,
  // directory_lock, async_checkpoint, async_max_staging_bytes, array_io, mpi_io_hints,
  // check_replicated, local_dir, flush_every, flush_interval_seconds, local_keep,
  // local_redundancy, xdmf_file); the loop's fields are the caller's. Takes the directory's
  // lock and checks, before anything is written, that every rank sees the same directory and
  // can write its node-local one (UsageError or CheckpointError on every rank otherwise).
  CheckpointManager(const Job& arrays, const Communicator& comm, const RunOptions& options);
  // Waits for the save in flight and commits it (as wait()), unless an exception is unwinding,
  // then releases the lock.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Every declared array created anew in `workspace`, as a run's init group creates them.
  void create(Workspace& workspace) const;
  // Collective: loads `request` (an epoch, or the newest that verifies) into `workspace`, at
  // any rank count for global arrays; nullopt (nothing loaded) from scratch or when the
  // directory holds no checkpoint for `latest`. Throws as a run's resume does.
  std::optional<Restored> restore(const ResumeRequest& request, Workspace& workspace);
  // Collective: saves `epoch` of the arrays of `workspace` (the save in flight is committed
  // first). With async_checkpoint it returns once the write runs beside the caller
  // (in_background); `workspace` may change at once. The loop's `last` save is written at once
  // and flushed to the checkpoint directory, as a run's last is. A failed save is reported in
  // the result, not thrown.
  SaveResult save(std::int64_t epoch, const Workspace& workspace, bool last = false);
  // Collective: waits for the save in flight and commits it; nullopt when none is.
  std::optional<SaveResult> wait();
  // The newest epoch committed to the checkpoint directory, the same on every rank.
  std::optional<std::int64_t> latest() const;

  struct Impl;
  // The runner's way in (internal to the library).
  Impl& impl() { return *impl_; }

 private:
  Communicator comm_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epochrun
