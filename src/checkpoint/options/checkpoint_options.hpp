// What the checkpoint layer needs to know of a run: where its checkpoints go, what each one
// records, what is kept, and how saves are made. The runner fills it from its RunOptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "epochrun/array_io.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/retention.hpp"
#include "epochrun/uploader.hpp"
#include "local_redundancy_options.hpp"
#include "mpi_io_file.hpp"

namespace epochrun {

// How a save writes its global arrays (--array-io; array_path.hpp): the requested path and the
// collective writes' hints.
struct ArrayIoOptions {
  ArrayIo path = ArrayIo::kAuto;
  MpiIoHints hints;
};

// Which checkpoints a run with node-local copies flushes to the checkpoint directory
// (--flush-every, --flush-interval; FlushSchedule, flush_schedule.hpp).
struct FlushOptions {
  std::int64_t every = 1;                  // 0: by time alone
  std::optional<double> interval_seconds;  // unset: by count alone
  bool flushes_every_checkpoint() const { return every == 1; }
};

struct CheckpointOptions {
  std::filesystem::path checkpoint_dir;  // empty: no checkpoints at all
  std::string config_json = "{}";        // recorded in every checkpoint
  RetentionPolicy retention;             // applied after every commit
  std::shared_ptr<Uploader> uploader;    // null: no upload
  // How long a rank waits for the others at each step of a save before it aborts the job.
  std::chrono::duration<double> save_timeout = kDefaultSaveTimeout;
  bool async_checkpoint = false;
  // A snapshot beyond this many bytes on any rank makes that save synchronous (unset: none).
  std::optional<std::uint64_t> async_max_staging_bytes;
  // How global arrays are written (--array-io), and the hints of their collective MPI-IO writes.
  ArrayIoOptions arrays;
  // Every save compares the ranks' replicated blobs and fails when they differ.
  bool check_replicated = false;
  // Rank 0 holds the directory's lock, which every run that saves there holds: a temporary file
  // of a save is then known to be the leftover of a run that is gone, and is removed. Unlocked,
  // it may be another run's save in flight, and is left.
  bool directory_locked = false;
  // Node-local staging (--local-dir; empty: none): each save writes every rank's part there
  // first, and the shared checkpoint file is written from it in the background.
  std::filesystem::path local_dir;
  // With local_dir: which checkpoints are flushed to checkpoint_dir (FlushSchedule; default:
  // every one); the others are node-local epochs, committed by a manifest (LocalLevel).
  FlushOptions flush;
  // With local_dir: how many epochs' node-local copies each rank keeps (the newest ones).
  std::int64_t local_keep = 1;
  // With local_dir: how each node-local epoch's copies are protected across hosts
  // (local_redundancy.hpp; default none).
  LocalRedundancy local_redundancy;
  // An XDMF file (empty: none) that rank 0 rewrites after every commit and deletion, describing
  // every committed epoch's global arrays for ParaView and VisIt (BackgroundXdmf).
  std::filesystem::path xdmf_file;
};

}  // namespace epochrun
