// Reading and writing one checkpoint file.
//
// Saves and resumes are collective over a communicator, but make no collective HDF5 or MPI-IO
// call: rank 0 lays the file out with serial HDF5 (groups, attributes, contiguous datasets) and
// every rank moves its own node's blobs with pwrite/pread at the datasets' offsets. The ranks
// meet between steps in an agreement bounded on every rank, so a save or a load that cannot
// complete ends in bounded time (docs/FORMAT.md). CheckpointReader reads from one process with
// no MPI at all (partial loads, `epochrun inspect`).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// How long a rank waits at one step of a save or a load for the other ranks (--save-timeout):
// longer than any legitimate step (a stopped or hung rank is the only thing that takes longer).
inline constexpr std::chrono::seconds kDefaultSaveTimeout{600};

// Collective. Creates `file` (must not exist) with mode 0644 and writes `blob_names` of
// `workspace` as the node `header.node_names[comm.rank()]`; `header.blobs` is filled in here
// from every rank's blobs. The file is complete, sealed and fsynced on every rank when it
// returns. A failure on any rank throws on every rank (the caller removes the file); when some
// rank does not reach a step's agreement within `timeout`, the job is aborted (exit code 1)
// with a critical log line naming the step and the ranks that did not come.
void write_checkpoint_file(const std::filesystem::path& file, const Communicator& comm,
                           CheckpointHeader header, const Workspace& workspace,
                           const std::vector<std::string>& blob_names,
                           std::chrono::duration<double> timeout = kDefaultSaveTimeout);

// What a resuming run expects a checkpoint to be.
struct CheckpointExpectation {
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;
};

// Collective. Rank 0 verifies the file (integrity header, then every dataset's layout) and
// checks the header against `expected` (CheckpointMismatch naming what differs); then every
// rank loads its node's blobs into `workspace`, verifying each checksum (CorruptCheckpoint
// naming file and dataset). Returns the names loaded, in save order. Bounded by `timeout` at
// each step as write_checkpoint_file is.
std::vector<std::string> read_checkpoint_file(
    const std::filesystem::path& file, const Communicator& comm,
    const CheckpointExpectation& expected, Workspace& workspace,
    std::chrono::duration<double> timeout = kDefaultSaveTimeout);

// Serial, read-only access to one checkpoint file.
class CheckpointReader {
 public:
  // Opens the file (a regular file only, never blocking), verifies its integrity header and
  // every dataset's layout, and reads the header; CorruptCheckpoint when the file is not an
  // intact epochrun checkpoint, CheckpointMismatch when its format version is unknown,
  // CheckpointNotFound when it does not exist (it may have been deleted since it was listed).
  // The file stays open: a reader goes on reading it even when it is deleted or replaced.
  explicit CheckpointReader(const std::filesystem::path& file);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const CheckpointHeader& header() const;
  // The file's size when it was opened.
  std::uint64_t file_bytes() const;
  bool has_blob(const std::string& node, const std::string& blob) const;
  // Reads and verifies one blob; CheckpointError when the node or blob is not in the file.
  Blob read_blob(const std::string& node, const std::string& blob) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epochrun
