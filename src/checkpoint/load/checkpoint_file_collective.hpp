// Loading one checkpoint file of format version 1 or 2 collectively, at the rank count that wrote
// it: rank 0 verifies the file, every rank reads its own node's blobs with pread at the datasets'
// offsets, and the ranks meet between steps in an agreement bounded on every rank, so a load
// that cannot complete ends in bounded time (docs/FORMAT.md). Version 3 files load with
// checkpoint_load_v3. The single-process reader is public (CheckpointReader,
// <epochrun/checkpoint_file.hpp>).
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
// each step.
std::vector<std::string> read_checkpoint_file(
    const std::filesystem::path& file, const Communicator& comm,
    const CheckpointExpectation& expected, Workspace& workspace,
    std::chrono::duration<double> timeout = kDefaultSaveTimeout);

}  // namespace epochrun
