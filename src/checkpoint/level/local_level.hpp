// The node-local level of a run's checkpoints (--local-dir): every rank's node-local copy of an
// epoch, and, for an epoch that is not flushed (--flush-every, --flush-interval), its commit
// by a manifest in the checkpoint directory (local_manifest.hpp); which copies and manifests
// are kept (--local-keep); and the level switched off for the rest of the run when the
// node-local file system fails (the saver then flushes every checkpoint). The saver asks it;
// it never sees the shared checkpoint file. Internal to the library.
//
// A node-local epoch E is saved in these steps, each agreed:
//   1. every rank writes its copy (write_copies);
//   2. the copies are protected across hosts (store_redundancy: the seam of --local-redundancy;
//      with none, nothing);
//   3. rank 0 gathers each rank's host and copy record and commits the manifest.
// Only then does E count as saved.
//
// An asynchronous run (--async-checkpoint, MPI at MPI_THREAD_MULTIPLE on every rank) does step 2
// in the background instead: the manifest commits E at once as unprotected ("none": its copies
// are complete and agreed, so a resume on the same hosts may load it), and a thread of the level
// stores the redundancy on a communicator of its own while the job runs its next epoch; only
// once every rank's redundancy files are complete (renamed, agreed) does rank 0 rewrite the
// manifest to say partner|xor. A kill in between leaves a manifest that claims nothing it does
// not have. The exchange in flight is settled (waited for) before the level's next save, by
// the saver's complete(), and when the level ends; a failure leaves E unprotected with the same
// warning as a synchronous save's.
//
// Retention keeps, whatever --local-keep says, the newest epoch whose manifest says
// partner|xor until a newer one is protected or a newer checkpoint is flushed: while E's
// exchange runs (or after it failed) that is E - 1, which a lost host then resumes from. Once
// E is protected, E - 1 goes before the next copy is written (it becomes the spare that copy is
// written over), so the level holds no more than --local-keep + 1 states at a save's peak.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_options.hpp"
#include "epochrun/communicator.hpp"
#include "local_copy.hpp"
#include "local_manifest.hpp"
#include "save_phases.hpp"

namespace epochrun {

class LocalLevel {
 public:
  // Collective (with --local-redundancy, an allgather of the hosts: rank 0 warns of what it
  // cannot protect).
  LocalLevel(std::string job, const Communicator& comm, const CheckpointOptions& options);
  // Settles the exchange in flight (settle()) and deletes this rank's spare.
  ~LocalLevel();
  LocalLevel(const LocalLevel&) = delete;
  LocalLevel& operator=(const LocalLevel&) = delete;

  // Whether saves go through node-local copies: --local-dir given and its file system has not
  // failed in this run.
  bool active() const { return !options_.local_dir.empty() && !failed_; }

  // Collective, step 1: every rank writes its copy of `epoch` from `blobs`, then runs `then`
  // (the flush maps the copy), in one bounded agreement. Returns this rank's copy record;
  // nullopt on every rank when any rank's failed: the level is then off for the rest of the run
  // (rank 0 says so in one line), and nothing of the copy is left.
  std::optional<LocalCopyRecord> write_copies(std::int64_t epoch,
                                              const std::vector<SavedBlob>& blobs,
                                              const std::function<void()>& then = {});

  // Collective: steps 1 to 3 for an epoch that is not flushed. False as write_copies; throws
  // (the same on every rank) when the manifest could not be committed (a failed save). Each
  // step's time goes to `phases`.
  // In an asynchronous run, step 2 goes on in the background after it returns (see above).
  bool save(std::int64_t epoch, const std::vector<SavedBlob>& blobs, SavePhases& phases);
  // Collective, after write_copies of an epoch that is flushed in the background, with node-local
  // epochs (--flush-every N > 1, --flush-interval): steps 2 and 3 as save() takes them, so that
  // the epoch is committed node-local (and protected across hosts) while its flush runs. A run
  // killed before the flushed file commits then resumes from it, not from the node-local epoch
  // before it. When every checkpoint is flushed (staging alone): nothing. Throws as save().
  void commit_while_flushed(std::int64_t epoch, const LocalCopyRecord& record, SavePhases& phases);
  // Waits for the background redundancy exchange in flight, if any: on return its epoch's
  // manifest says what protects it. Collective in effect (the exchange is); bounded by
  // --save-timeout as the exchange is. Every other step of the level settles first.
  void settle();

  // A background exchange that settled: its epoch, and this rank's seconds in it (on the
  // level's thread, beside the job).
  struct SettledExchange {
    std::int64_t epoch = 0;
    double seconds = 0;
  };
  // The background exchanges settled since the last call. The same epochs on every rank: each
  // settles at the same step of the run, whenever its thread finished.
  std::vector<SettledExchange> take_settled_exchanges();

  // Every rank's copy of `epoch` is complete and committed (by its manifest or by the flushed
  // checkpoint): a resume may load it, and retention counts it.
  void kept(std::int64_t epoch);
  // Deletes this rank's copies (and, rank 0, the manifests) of every epoch but the newest
  // --local-keep kept ones, `flushing`, whose copy a flush in flight still reads, the epoch
  // whose exchange is in flight and the newest protected one (above).
  // The oldest copy it deletes is kept as the rank's spare, which its next copy is written
  // over.
  void retain(std::optional<std::int64_t> flushing = std::nullopt);
  // The run resumed from `epoch` (`node_local`: from its node-local copies and manifest): its
  // copies are the only kept ones; those of any later epoch (another timeline's) go at the
  // next retain. With --local-redundancy, a node-local `epoch` counts as the newest protected
  // one.
  void resumed(std::int64_t epoch, bool node_local);
  // Deletes this rank's copies, its spare and (rank 0) the manifests of every epoch.
  void delete_all();
  // Collective: a checkpoint committed to the checkpoint directory. Once the level failed in
  // this run, the first one is newer than every node-local epoch, which a resume then passes
  // over: delete_all, so that what the level kept does not hold its file system (often memory,
  // perhaps full) for good. Otherwise no protected node-local epoch need be kept for it any
  // more (retention deletes it as --local-keep says).
  void flushed();

 private:
  // Step 2, after every rank's copy of `epoch` is written and agreed, before the manifest
  // commits the epoch. The seam of the cross-host redundancy (--local-redundancy partner|xor,
  // local_redundancy.hpp): each rank's copy, local_copy_file(options_.local_dir, epoch, rank),
  // is stored again on another host (a partner's copy, or a set's XOR parity) here, so that a
  // lost host's copies can be rebuilt at a restart. With --local-redundancy none: nothing.
  // Returns the redundancy kind the manifest records ("none" also when the protection failed:
  // the epoch is saved, unprotected, with a warning).
  // Its MPI calls are on `on` alone.
  std::string store_redundancy(std::int64_t epoch, const Communicator& on);
  // Steps 2 and 3 for `epoch`, whose copies write_copies wrote (in an asynchronous run, step 2
  // goes on in the background: see above).
  void commit_copies(std::int64_t epoch, const LocalCopyRecord& record, SavePhases& phases);
  // Step 3: gathers every rank's part to rank 0, which writes the manifest. Returns it (rank
  // 0; the others an empty one).
  LocalManifest commit_manifest(std::int64_t epoch, const LocalCopyRecord& record,
                                const std::string& redundancy);
  // Step 2 of an asynchronous run, on exchange_, after step 3 committed `manifest` unprotected.
  // True when the epoch is protected: every rank's files stored and the manifest rewritten
  // (the same on every rank).
  bool protect_in_background(LocalManifest manifest);
  // `epoch`'s manifest says partner|xor: the newest protected epoch, unless a newer one is.
  void protect(std::int64_t epoch);
  // exchange_'s loop: runs each task, until the level ends.
  void run_exchanges();
  // Deletes the copies and manifests of every epoch but `keep`; `spare`: whether the oldest
  // copy deleted becomes the rank's spare (local_copy.hpp).
  void remove(std::vector<std::int64_t> keep, SpareCopy spare);

  std::string job_;
  const Communicator& comm_;
  const CheckpointOptions& options_;
  bool failed_ = false;
  std::deque<std::int64_t> kept_;         // ascending, at most --local-keep
  std::vector<std::int64_t> manifested_;  // of kept_, those committed by a manifest
  // The background exchange's own duplicate of comm_ (an asynchronous run with redundancy, MPI
  // at MPI_THREAD_MULTIPLE): its messages can never match the job's, whatever the job's thread
  // does meanwhile. Without it, step 2 runs on the job's thread.
  std::optional<Communicator> exchange_comm_;
  // The background exchanges' one thread, kept for the run: its transfer buffers
  // (piece_transfer.hpp's chunk_buffer, one per thread) are then made resident once, not at
  // every exchange. Started at the first.
  std::thread exchange_;
  std::mutex exchange_mutex_;
  std::condition_variable exchange_wake_;
  std::optional<LocalManifest> exchange_task_;  // step 2 of this epoch's manifest, to run
  bool exchange_stopping_ = false;
  double exchange_seconds_ = 0;      // the last exchange's, set by its thread before it ends
  bool exchange_protected_ = false;  // the last exchange's outcome, set as exchange_seconds_
  // The epoch whose exchange is in flight (set and cleared by the job's thread only): never
  // deleted by retention until it settled.
  std::optional<std::int64_t> exchanging_;
  std::vector<SettledExchange> settled_;  // the job's thread only
  // The newest epoch whose manifest says partner|xor, kept by retention until a newer one is
  // protected or a checkpoint is flushed (the job's thread only).
  std::optional<std::int64_t> protected_;
  // A settled exchange protected a newer epoch: the next write_copies applies retention first.
  bool prune_ = false;
};

}  // namespace epochrun
