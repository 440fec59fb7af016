// The JobRunner: runs a Job on every rank in the reference's order, with a checkpoint after
// init, after every epoch the checkpoint policy chooses, and after the last.
//
//   resume decision -> init (from scratch) or load -> checkpoint 0 (from scratch)
//   -> loop { preemption since the last decision? -> epoch group
//             -> stop flags, preemption signals and time limit to rank 0, rank 0 decides,
//                broadcast -> commit the asynchronous save in flight (if any)
//             -> save this epoch (when the checkpoint policy or a stop says so; in the
//                background with --async-checkpoint, but synchronously when it stops the run)
//             -> stop? }
//   -> finished job: upload -> gather declared outputs to rank 0 -> download group
//                    -> exit group -> delete-on-success
//      interrupted (preempted): nothing more; exit code 75 asks for a requeue
//
// Each commit is followed by the post-commit steps (index, retention); every epoch, load and
// background save end appends a line to <checkpoint dir>/metrics.jsonl.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/array_io.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_policy.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/export.hpp"
#include "epochrun/job.hpp"
#include "epochrun/retention.hpp"
#include "epochrun/run_summary.hpp"
#include "epochrun/stop_decision.hpp"
#include "epochrun/uploader.hpp"

namespace epochrun {

// Where to start: from scratch, from an explicit epoch, or from the newest committed one
// (from scratch when there is none).
struct EPOCHRUN_API ResumeRequest {
  enum class Kind { kFromScratch, kEpoch, kLatest };
  Kind kind = Kind::kFromScratch;
  std::int64_t epoch = 0;

  static ResumeRequest from_scratch() { return {}; }
  static ResumeRequest latest() { return {Kind::kLatest, 0}; }
  static ResumeRequest at(std::int64_t epoch) { return {Kind::kEpoch, epoch}; }
  // "latest" or a non-negative integer; UsageError otherwise.
  static ResumeRequest parse(const std::string& text);
};

struct RunOptions {
  std::filesystem::path checkpoint_dir;  // empty: no checkpoints at all
  ResumeRequest resume;
  // Stop after this absolute epoch number (a resumed run counts from where it resumed).
  std::optional<std::int64_t> num_epochs;
  std::shared_ptr<Uploader> uploader;  // null: no upload
  std::string config_json = "{}";      // recorded in every checkpoint
  // Run-defining job options ("<job>.<key>") that may differ from the resumed checkpoint's.
  std::vector<std::string> allowed_config_changes;
  RetentionPolicy retention;           // applied after every commit
  CheckpointPolicy checkpoint_policy;  // which epochs between init and the last are saved
  // The mean time between failures of the whole allocation (--mtbf; unset: none given): after
  // its first save the run prints the Young/Daly checkpoint interval for it, and with
  // checkpoint_every_auto checkpoints by that interval from then on (every epoch until then).
  std::optional<double> mtbf_seconds;
  bool checkpoint_every_auto = false;
  // Keras' backup-and-restore: the checkpoints are deleted once the exit group has succeeded.
  bool delete_checkpoints_on_success = false;
  // How long a rank whose task threw waits for the other ranks to learn of it. They may be
  // blocked in a collective call of the job that the failing rank will never make; after this
  // the failing rank aborts the whole job (MPI_Abort, exit code 1) rather than hang it.
  std::chrono::duration<double> task_failure_timeout = std::chrono::seconds(60);
  // Signals that ask the run to stop after the epoch in progress, checkpoint it and exit
  // with ExitCode::kRequeue (docs/PREEMPTION.md). Empty: none are caught.
  std::vector<int> preempt_signals = {SIGUSR1, SIGTERM};
  // The time limit: the run stops with ExitCode::kRequeue after the epoch whose checkpoint,
  // plus the next epoch and its checkpoint, would not end `time_margin` before the earlier of
  // program_start + time_budget and (under SLURM) the job's end time from squeue.
  std::chrono::steady_clock::time_point program_start = std::chrono::steady_clock::now();
  std::optional<double> time_budget_seconds;
  std::optional<double> time_margin_seconds;  // unset: 60 s under SLURM, 0 otherwise
  // How long a rank waits for the others at each step of a save or a load before it aborts
  // the job (MPI_Abort, exit code 1): only a stuck rank (a hung disk, a stopped process) makes
  // a step take longer.
  std::chrono::duration<double> save_timeout = kDefaultSaveTimeout;
  // Rank 0 holds an flock on the checkpoint directory for the whole run, and a run that cannot
  // take it is refused (CheckpointError). False runs unlocked, for file systems without flock:
  // keeping other runs away from the directory is then up to the user.
  bool directory_lock = true;
  // Save in the background (docs/PREEMPTION.md, README): the epoch's blobs are copied at its
  // end and written while the next epoch runs; the last checkpoint and one at a stop are
  // synchronous. Needs MPI initialised with at least MPI_THREAD_FUNNELED; at
  // MPI_THREAD_MULTIPLE (MpiSession's) the global arrays are written in the background too,
  // below it at the next epoch boundary.
  bool async_checkpoint = false;
  // A snapshot beyond this many bytes on any rank makes that save synchronous (unset: none).
  std::optional<std::uint64_t> async_max_staging_bytes;
  // How a save writes global arrays (ArrayIo, array_io.hpp; --array-io): each rank its
  // contiguous block with direct I/O, or one collective MPI-IO write.
  ArrayIo array_io = ArrayIo::kAuto;
  // MPI-IO hints (name -> value) for the collective writes and reads of global arrays.
  std::map<std::string, std::string> mpi_io_hints;
  // Every save compares the ranks' replicated blobs and fails when they differ.
  bool check_replicated = false;
  // Node-local staging, as SCR and VeloC do it (empty: none): each save writes every rank's
  // part into this node-local directory, the job goes on, and the shared checkpoint file is
  // written from there in the background and committed once every rank's part is written and
  // verified; a resume on the same ranks and hosts loads the node-local copies when every rank
  // has a complete one that verifies. Needs MPI_THREAD_FUNNELED, as async_checkpoint does.
  std::filesystem::path local_dir;
  // Levels, with local_dir: a checkpoint is flushed to checkpoint_dir when it is the run's first
  // (unless it resumed), the flush_every-th after the last flushed one (0: by time alone), the
  // first one flush_interval_seconds or more after the last flush, the last one of the run or
  // the one a stop takes; every other is saved node-local only and committed by a small
  // manifest in checkpoint_dir. The default flushes every checkpoint.
  std::int64_t flush_every = 1;
  std::optional<double> flush_interval_seconds;
  // With local_dir: each rank keeps the node-local copies of the newest local_keep epochs.
  std::int64_t local_keep = 1;
  // With local_dir: how the node-local epochs' copies are protected against the loss of a host
  // (--local-redundancy): "none", "partner" (each copy also on a rank of another host) or
  // "xor:N" (XOR parity over sets of N hosts); a restart rebuilds a lost host's copies from them.
  std::string local_redundancy = "none";
  // An XDMF file (empty: none) describing every committed epoch's global arrays as a time
  // series for ParaView and VisIt, rewritten by rank 0 after every commit, off the job's path.
  std::filesystem::path xdmf_file;
};

class EPOCHRUN_API JobRunner {
 public:
  // The tasks get `comm`; the runner works on a duplicate of it, so that its own collective
  // calls never match the job's.
  JobRunner(Job job, const Communicator& comm, RunOptions options);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Runs the whole job on this rank's `workspace`. Save failures do not throw (they are in
  // the summary); a failing task, a failing load or a bad resume request does.
  RunSummary run(Workspace& workspace);

  // The reference's load_blobs_from_checkpoints: see CheckpointDirectory::load_blobs.
  bool load_blobs_from_checkpoints(const std::vector<BlobAddress>& wanted, std::int64_t epoch,
                                   Workspace& workspace) const;

  const std::string& node_name() const;

 private:
  // The runner's state and steps (src/run/job_runner.cpp): the library's own business, so
  // that they change without changing this class's layout.
  struct EPOCHRUN_HIDDEN Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epochrun
