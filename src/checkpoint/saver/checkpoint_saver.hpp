// Saving an epoch's checkpoint: the save and commit (DirectorySave), then the post-commit
// steps; a failed save is recorded and the job goes on (the reference's contract).
//
// Asynchronous saves (--async-checkpoint): at the epoch boundary the checkpointed blobs are
// copied once into staging buffers (kept from one save to the next), the file is laid out on
// the main thread, and this rank's data is written by a background thread while the job runs
// the next epoch. When MPI lets any thread make MPI calls (MPI_THREAD_MULTIPLE, on every rank),
// the background thread also writes the global arrays with their collective MPI-IO writes and
// seals the file, on a communicator of the saves' own, so that the job's MPI calls meanwhile
// never meet the save's; complete() then only commits it. Otherwise complete() seals it on the
// main thread (the whole collective write at the next epoch boundary). At most one save is in
// flight. A snapshot beyond the staging limit on any rank makes that save synchronous on every
// rank. A synchronous save copies nothing.
//
// Node-local staging (--local-dir) is the same in-flight save with the snapshot on node-local
// storage instead of memory: each rank writes its part into its node-local copy (local_copy),
// the shared file is laid out, and the background thread writes this rank's part of it from the
// copy, hashing what it reads against what the copy was made from; complete() commits it only
// when every rank's part was written and verified. The last save and one at a stop write the
// copy and flush it at once.
//
// Levels (--flush-every, --flush-interval): with --local-dir, a checkpoint the flush schedule
// does not pick (FlushSchedule) is saved node-local only, committed by its manifest in the
// checkpoint directory (LocalLevel); the run's first, the Nth after each flush, the last and
// one at a stop are flushed as above. A node-local file system that fails switches the level
// off for the rest of the run: every checkpoint is then flushed, without node-local copies.
// In an asynchronous run the level stores a node-local epoch's redundancy across hosts in the
// background (LocalLevel::save); complete() waits for it as for the flush.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "blob_plan.hpp"
#include "checkpoint_options.hpp"
#include "directory_save.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"
#include "flush_schedule.hpp"
#include "local_copy.hpp"
#include "local_level.hpp"
#include "post_commit_steps.hpp"
#include "save_phases.hpp"
#include "staging_buffer.hpp"

namespace epochrun {

// What one save, or one step of an asynchronous one, did, as this rank saw it.
struct SaveOutcome {
  std::int64_t epoch = 0;
  std::string log;             // "checkpoint epoch-000003.h5 1.2 MiB in ..." or the failure
  bool in_background = false;  // started, written while the job goes on: see complete()
  double seconds = 0;          // the whole save (begin to the end of its post-commit steps)
  double blocked_seconds = 0;  // of those, the job's thread was stopped for this step
  std::uint64_t bytes = 0;     // this rank's blob bytes
  bool committed = false;      // flushed and committed to the checkpoint directory
  bool node_local = false;     // saved node-local only, committed by its manifest (not flushed)
  std::optional<std::string> failure;  // the agreed error of a save that failed
  std::vector<std::int64_t> deleted;   // epochs the post-commit steps deleted after it
  // Where the save's time went on this rank (the whole save, once it completed) and the page
  // faults the process took while the job's thread was in it.
  SavePhases phases;
  // The path each global array took (the same on every rank), by name.
  std::vector<std::pair<std::string, ArrayPath>> array_paths;
};

class CheckpointSaver {
 public:
  CheckpointSaver(std::string job, const Communicator& comm, const CheckpointOptions& options,
                  std::vector<std::string> node_names, PostCommitSteps& post_commit);
  // A save still in flight here belongs to a run that failed: its thread is joined and its
  // temporary file removed (PendingCheckpoint), nothing is committed.
  ~CheckpointSaver();
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
  void delete_local_copies();

  // The node-local epochs' redundancy exchanges that ran in the background and settled since
  // the last call (LocalLevel::take_settled_exchanges).
  std::vector<LocalLevel::SettledExchange> take_settled_exchanges() {
    return level_.take_settled_exchanges();
  }

  std::optional<std::int64_t> last_committed() const { return last_committed_; }
  std::chrono::steady_clock::time_point last_commit_time() const { return last_commit_time_; }

 private:
  SavedFile root_for(std::int64_t epoch) const;
  // The blobs to save, as views of `workspace` or of the snapshot.
  std::vector<SavedBlob> saved_blobs(const Workspace& workspace) const;
  // Collective over `on`: begins the save of `blobs` (DirectorySave::begin, version 3).
  DirectorySave begin_save(std::int64_t epoch, std::vector<SavedBlob> blobs,
                           const Communicator& on) const;
  // Agreed: whether every rank's snapshot of `bytes` fits --async-max-staging-mib.
  bool staging_fits(std::uint64_t bytes) const;
  // Copies the blobs into staging_, hashing them as they are copied, and returns views of the
  // copies (their xxh64 set, direct I/O allowed).
  std::vector<SavedBlob> snapshot(const Workspace& workspace);
  // Agreed on every rank: whether this checkpoint is flushed (FlushSchedule).
  bool flush_due(std::chrono::steady_clock::time_point now) const;
  // A checkpoint that is not flushed: saved node-local only (LocalLevel::save). When the
  // node-local file system fails, the level goes off and the checkpoint is flushed instead.
  SaveOutcome save_node_local(std::int64_t epoch, const Workspace& workspace, SaveOutcome outcome,
                              std::chrono::steady_clock::time_point started);
  // Writes this rank's node-local copy of `epoch` and maps it (agreed: a failure on any rank
  // switches the level off on every rank: nullopt), and returns views of the copy for the flush.
  std::optional<std::vector<SavedBlob>> local_copy(std::int64_t epoch, const Workspace& workspace);
  // After a staged save committed (`committed`) or failed: unmaps its copy, counts it as kept
  // when it committed, and applies --local-keep.
  void local_copy_done(bool committed);
  // Records the commit `stats` describe and runs the post-commit steps; fills outcome.
  void committed(const SaveStats& stats, SaveOutcome& outcome);
  // Records in `outcome` the paths `save` writes the global arrays by; rank 0 logs them when
  // they are not the ones it logged last (the first save of the run, or a change).
  void note_array_paths(const DirectorySave& save, SaveOutcome& outcome);
  // A failed save of `epoch`: logged by rank 0, recorded in outcome.
  void commit_failed(std::int64_t epoch, const std::exception& error, SaveOutcome& outcome);

  std::string job_;
  const Communicator& comm_;
  const CheckpointOptions& options_;
  // The background saves' own duplicate of comm_, when they seal on the background thread.
  std::optional<Communicator> background_comm_;
  std::vector<std::string> node_names_;
  PostCommitSteps& post_commit_;
  std::vector<BlobPlan> blobs_;
  std::vector<std::string> names_;              // blobs_' names, in its order, for blob_views
  std::optional<std::int64_t> last_committed_;  // by this run, or the epoch it resumed from
  std::chrono::steady_clock::time_point last_commit_time_ = std::chrono::steady_clock::now();

  std::vector<StagingBuffer> staging_;  // the snapshot of the save in flight
  std::optional<DirectorySave> in_flight_;
  SaveOutcome in_flight_outcome_;
  std::chrono::steady_clock::time_point in_flight_started_;
  LocalLevel level_;
  FlushSchedule schedule_;
  std::optional<MappedLocalCopy> mapped_;  // the node-local copy the save in flight is flushed from
  std::thread writer_;                     // runs in_flight_->write_data()
  std::vector<std::pair<std::string, ArrayPath>> logged_array_paths_;
};

}  // namespace epochrun
