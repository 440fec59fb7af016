// Loading a version 3 checkpoint collectively, at the rank count it was written with or at
// another (docs/FORMAT.md): global arrays re-partitioned into the loading ranks' blocks with
// every writer block verified, replicated blobs on every rank, per-node blobs by the job's rule
// when the rank count changed. Internal to the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_layout_v3.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/global_array.hpp"
#include "epochrun/workspace.hpp"
#include "file_descriptor.hpp"
#include "mpi_io_file.hpp"

namespace epochrun {

// What a resume at another rank count does with one per-node blob.
struct PerNodeRule {
  // False: the blob is not loaded (the job creates it anew).
  bool load = false;
  // When loading: this rank's value from every old node's value (index = old rank).
  std::function<Blob(const std::vector<Blob>& old_values, int rank, int ranks)> redistribute;
};

// What the loading run expects and wants.
struct LoadRequest {
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;  // the loading run's, index = rank
  // Global arrays by name: the block each loading rank wants (index = rank). An array of the
  // file this does not name is loaded in balanced blocks.
  std::map<std::string, std::vector<Block>> array_blocks;
  // Per-node blobs by name, used only when the rank count changed; a per-node blob without
  // a rule then refuses the load (CheckpointMismatch naming every such blob).
  std::map<std::string, PerNodeRule> per_node_rules;
  MpiIoHints hints;
  // The node-local copies' directory (--local-dir; empty: none): at the rank count the file
  // was written with, each rank's values come from its copy when every rank's stands in for
  // the file (load_local_copies).
  std::filesystem::path local_dir;
};

// What a load did.
struct Loaded {
  std::vector<std::string> blobs;  // the names put into the workspace
  std::int64_t written_by_ranks = 0;
  std::vector<std::string> recreated;  // per-node blobs the job creates anew
  std::string config_json;             // the configuration the checkpoint records (rank 0)
  bool from_local_copies = false;      // the values came from the node-local copies
  // A node-local epoch some of whose parts were rebuilt or moved across hosts first
  // (--local-redundancy): where each host's parts came from (RecoveryReport::host_lines).
  std::string recovered_parts;
};

// Collective: loads the version 3 `file` into `workspace`. Rank 0 verifies the file's
// integrity header and layout and broadcasts them; every rank verifies every byte it reads (a
// global array's writer blocks before they are redistributed); the workspace changes only when
// every rank has all of its blobs.
// CheckpointMismatch (another job, a per-node blob without a rule), CorruptCheckpoint (damaged
// bytes), the same on every rank; each step bounded by `timeout`.
Loaded load_checkpoint_v3(const std::filesystem::path& file, const Communicator& comm,
                          const LoadRequest& request, Workspace& workspace,
                          std::chrono::duration<double> timeout);

// What rank 0's step of a load found: a version 3 file's layout (nothing for a version 1 or 2
// file), its bytes for the other ranks, and what of them travels in the step's agreement
// (`carried`): their count and, when they fit (a few dozen ranks), the bytes themselves, so that
// a small job's load needs no broadcast of its own for them.
struct RootLayout {
  // 2 KiB, the count and then the bytes: with the outcome, under the 4 KiB that Open MPI's
  // shared-memory transport sends eagerly (more waits for the receivers: with 4 KiB, rank 0
  // waited 0.04 ms in this broadcast at 3 ranks, a third of a whole load).
  static constexpr std::size_t kCarriedWords = 256;
  std::optional<StoredFileV3> stored;
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> carried = std::vector<std::int64_t>(kCarriedWords);
};

// Rank 0's step of a load: `file` judged (judge_checkpoint: its header and metadata hash, and its
// layout from its layout record when the record is bound to that metadata, otherwise from HDF5),
// then checked against `request` at `ranks` ranks; nothing for a version 1 or 2 file (`version`
// says which). Errors name the file.
// Fills `root` in place: its `carried` may already be handed to the agreement that follows.
void read_layout_for_load(const std::filesystem::path& file, const LoadRequest& request, int ranks,
                          std::int64_t& version, RootLayout& root);
// The same from `file` already open as `fd`.
void read_layout_for_load(int fd, const std::filesystem::path& file, const LoadRequest& request,
                          int ranks, std::int64_t& version, RootLayout& root);

// Collective, once every rank has rank 0's `root.carried` (its step's agreement carried them):
// rank 0's layout on every rank, from what was carried or in one broadcast of its bytes.
// Nothing on every rank for a version 1 or 2 file.
std::optional<StoredFileV3> share_layout(const Communicator& comm, RootLayout& root);

// Collective: the values of the version 3 `file` whose layout every rank has (share_layout) into
// `workspace`, as load_checkpoint_v3; read through `opened` when this rank has the file open
// already (it is not opened twice).
Loaded load_values_v3(const std::filesystem::path& file, const Communicator& comm,
                      const LoadRequest& request, Workspace& workspace,
                      std::chrono::duration<double> timeout, const StoredFileV3& stored,
                      FileDescriptor opened = FileDescriptor(-1));

// `values` (this rank's, read and verified from the file or from another source of the same
// bytes, such as the node-local copies) put into `workspace`, and what was loaded.
Loaded put_loaded_values(std::vector<std::pair<std::string, Blob>> values,
                         const StoredFileV3& stored, Workspace& workspace);

}  // namespace epochrun
