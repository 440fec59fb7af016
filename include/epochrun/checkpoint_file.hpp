// Reading and writing one checkpoint file with parallel HDF5.
//
// Writes are collective over a communicator (MPI-IO driver, collective metadata and
// collective transfers); every rank stores its own node's blobs. Reads for a resume are
// collective too; CheckpointReader reads from one process with no MPI at all (partial loads,
// `epochrun inspect`).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// Collective. Creates `file` (must not exist) and writes `blob_names` of `workspace` as the
// node `header.node_names[comm.rank()]`. `header.blobs` is filled in here from every rank's
// blobs. Throws SaveError on every rank when it fails on any rank.
void write_checkpoint_file(const std::filesystem::path& file, const Communicator& comm,
                           CheckpointHeader header, const Workspace& workspace,
                           const std::vector<std::string>& blob_names);

// What a resuming run expects a checkpoint to be.
struct CheckpointExpectation {
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;
};

// Collective. Checks the header against `expected` (CheckpointMismatch naming what differs),
// then loads this rank's node's blobs into `workspace`, verifying each checksum
// (CorruptCheckpoint naming file and dataset). Returns the names loaded, in save order.
std::vector<std::string> read_checkpoint_file(const std::filesystem::path& file,
                                              const Communicator& comm,
                                              const CheckpointExpectation& expected,
                                              Workspace& workspace);

// Serial, read-only access to one checkpoint file.
class CheckpointReader {
 public:
  // Opens and reads the header; CorruptCheckpoint when the file is not an epochrun
  // checkpoint, CheckpointMismatch when its format version is unknown.
  explicit CheckpointReader(const std::filesystem::path& file);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const CheckpointHeader& header() const;
  bool has_blob(const std::string& node, const std::string& blob) const;
  // Reads and verifies one blob; CheckpointError when the node or blob is not in the file.
  Blob read_blob(const std::string& node, const std::string& blob) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epochrun
