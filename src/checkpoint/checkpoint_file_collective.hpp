// Writing and loading one checkpoint file collectively, as the runner's saves and resumes do.
//
// Saves and resumes are collective over a communicator, but make no collective HDF5 or MPI-IO
// call: rank 0 lays the file out with serial HDF5 (groups, attributes, contiguous datasets) and
// every rank moves its own node's blobs with pwrite/pread at the datasets' offsets. The ranks
// meet between steps in an agreement bounded on every rank, so a save or a load that cannot
// complete ends in bounded time (docs/FORMAT.md). The single-process reader is public
// (CheckpointReader, <epochrun/checkpoint_file.hpp>).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

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

}  // namespace epochrun
