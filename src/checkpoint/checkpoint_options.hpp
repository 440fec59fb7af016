// What the checkpoint layer needs to know of a run: where its checkpoints go, what each one
// records, what is kept, and how saves are made. The runner fills it from its RunOptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/retention.hpp"
#include "epochrun/uploader.hpp"
#include "mpi_io_file.hpp"

namespace epochrun {

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
  // Passed to the collective MPI-IO writes and reads of global arrays.
  MpiIoHints mpi_io_hints;
  // Every save compares the ranks' replicated blobs and fails when they differ.
  bool check_replicated = false;
};

}  // namespace epochrun
