// Saving an epoch's checkpoint: one sequence over the levels it goes to (checkpoint_level.hpp),
// then the post-commit steps; a failed save is recorded and the job goes on (the reference's
// contract).
//
//   route     once per checkpoint, from the run's options and the flush schedule: node-local
//             copies or not, the shared file or not, now or later (SaveRoute)
//   snapshot  an asynchronous save without node-local copies copies the blobs into staging
//             buffers (kept from one save to the next): the job may change its workspace at once
//   begin     each level in turn (NodeLocalLevel, then SharedFileLevel), each writing from the
//             views the one before handed it; a level whose file system failed is left out and
//             the checkpoint routed again without it
//   finish    the shared file's data, now or on its own thread while the job runs the next
//             epoch (the asynchronous write and the staged flush alike)
//   commit    at once, or at the next epoch boundary (complete()): each level's finish-later
//             step waited for, the file committed, the post-commit steps run
//
// Asynchronous saves (--async-checkpoint): at most one save is in flight. A snapshot beyond the
// staging limit on any rank makes that save synchronous on every rank. A synchronous save copies
// nothing: the shared file is written from the workspace, with direct I/O where it can.
//
// Node-local staging (--local-dir) is the same in-flight save with the snapshot on node-local
// storage instead of memory: each rank writes its node-local copy first, and the shared file
// is written from the copy, hashed against what the copy was made from; complete() commits it
// only when every rank's part was written and verified. The last save and one at a stop write
// the copy and flush it at once.
//
// Levels (--flush-every, --flush-interval): with --local-dir, a checkpoint the flush schedule
// does not pick is saved node-local only, committed by its manifest in the checkpoint directory
// (LocalLevel); the run's first, the Nth after each flush, the last and one at a stop are
// flushed as above. A node-local file system that fails switches the level off for the rest of
// the run: every checkpoint is then flushed, without node-local copies. In an asynchronous run
// the level stores a node-local epoch's redundancy across hosts in the background;
// complete() waits for it as for the flush.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "blob_plan.hpp"
#include "checkpoint_level.hpp"
#include "checkpoint_options.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"
#include "node_local_level.hpp"
#include "post_commit_steps.hpp"
#include "save_outcome.hpp"
#include "shared_file_level.hpp"
#include "staging_buffer.hpp"

namespace epochrun {

class CheckpointSaver {
 public:
  CheckpointSaver(std::string job, const Communicator& comm, const CheckpointOptions& options,
                  std::vector<std::string> node_names, PostCommitSteps& post_commit);
  // A save still in flight here belongs to a run that failed: its thread is joined and its
  // temporary file removed (SharedFileLevel), nothing is committed.
  ~CheckpointSaver() = default;
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // What every checkpoint of this run holds: the loaded blobs, or what init created, each with
  // its kind of storage.
  void set_blobs(std::vector<BlobPlan> blobs);
  // The epoch the run resumed from counts as committed (for the checkpoint policy); as flushed
  // unless `node_local` (it was loaded from its node-local copies and manifest).
  void resumed_from(std::int64_t epoch, bool node_local = false);

  // Collective, with no save in flight: saves `epoch` from `workspace`. Synchronously (commit
  // and post-commit steps done) unless the run saves
  // asynchronously, `may_run_in_background` and the snapshot fits the staging limit: then it
  // returns once the write runs in the background (outcome.in_background). Without a
  // checkpoint directory: nothing.
  SaveOutcome save(std::int64_t epoch, const Workspace& workspace, bool may_run_in_background);
  // Collective: waits for the save in flight, commits it and runs the post-commit steps.
  // nullopt when none is in flight.
  std::optional<SaveOutcome> complete();

  // Deletes this rank's node-local copies (the checkpoints they stand in for are deleted:
  // --delete-checkpoints-on-success).
  void delete_local_copies() {
    if (local_) {
      local_->delete_all();
    }
  }

  // The node-local epochs' redundancy exchanges that ran in the background and settled since
  // the last call (LocalLevel::take_settled_exchanges).
  std::vector<LocalLevel::SettledExchange> take_settled_exchanges() {
    return local_ ? local_->take_settled_exchanges() : std::vector<LocalLevel::SettledExchange>{};
  }

  std::optional<std::int64_t> last_committed() const { return last_committed_; }
  std::chrono::steady_clock::time_point last_commit_time() const { return last_commit_time_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Collective: where the checkpoint begun at `now` goes (SaveRoute), from the options, the
  // flush schedule and, for an asynchronous save, whether every rank's snapshot of `bytes` fits
  // --async-max-staging-mib.
  SaveRoute route(std::int64_t epoch, bool may_run_in_background, std::uint64_t bytes,
                  Clock::time_point now);
  // The blobs to save, as views of `workspace`.
  std::vector<SavedBlob> saved_blobs(const Workspace& workspace) const;
  // Copies `blobs` into staging_, hashing them as they are copied, and returns views of the
  // copies (their xxh64 set, direct I/O allowed).
  std::vector<SavedBlob> snapshot(std::vector<SavedBlob> blobs, SavePhases& phases);
  // A checkpoint saved node-local only: recorded, and --local-keep applied.
  SaveOutcome saved_node_local(SaveOutcome outcome, Clock::time_point started,
                               PageFaults faults_before);
  // Records the commit of the shared file and runs the post-commit steps; fills outcome.
  void committed(SaveOutcome& outcome);
  // A failed save of `epoch`: logged by rank 0, recorded in outcome.
  void commit_failed(std::int64_t epoch, const std::exception& error, SaveOutcome& outcome);

  const Communicator& comm_;
  const CheckpointOptions& options_;
  PostCommitSteps& post_commit_;
  std::vector<BlobPlan> blobs_;
  std::vector<std::string> names_;              // blobs_' names, in its order, for blob_views
  std::optional<std::int64_t> last_committed_;  // by this run, or the epoch it resumed from
  Clock::time_point last_commit_time_ = Clock::now();

  // Declared before the levels: the shared file's thread may still read it as they end.
  std::vector<StagingBuffer> staging_;  // the snapshot of the save in flight
  // The levels of this run, chosen once from its options: the node-local one with --local-dir.
  std::unique_ptr<NodeLocalLevel> local_;
  SharedFileLevel shared_;
  SaveOutcome in_flight_outcome_;  // of the save whose shared file is in flight
  Clock::time_point in_flight_started_;
};

}  // namespace epochrun
