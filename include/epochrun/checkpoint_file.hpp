// Reading one checkpoint file from a single process, with no MPI at all (partial loads,
// `epochrun inspect`), of any format version 1 to 3. The runner's saves and resumes write and
// load the same files collectively; docs/FORMAT.md describes the file.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "epochrun/checkpoint_format.hpp"
#include "epochrun/export.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {

// How long a rank waits at one step of a save or a load for the other ranks (--save-timeout):
// longer than any legitimate step (a stopped or hung rank is the only thing that takes longer).
inline constexpr std::chrono::seconds kDefaultSaveTimeout{600};

// Serial, read-only access to one checkpoint file.
class EPOCHRUN_API CheckpointReader {
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
  // Reads and verifies one per-node blob; CheckpointError when the node or blob is not in the
  // file.
  Blob read_blob(const std::string& node, const std::string& blob) const;
  // Version 3: reads and verifies the replicated blob `name` (header().replicated);
  // CheckpointError when the file has none of that name.
  Blob read_replicated(const std::string& name) const;
  // Version 3: the global array `name` (header().arrays), whole or the cells of `part` (a
  // block of the same dimensions inside the global shape), row-major. Every writer block the
  // part meets is read whole and verified before its cells are copied: every byte returned was
  // verified. CheckpointError when there is no such array, UsageError for a part outside it.
  Blob read_array(const std::string& name, std::optional<Block> part = {}) const;

  // Verification that keeps no value (`epochrun inspect --verify`): each reads what the read_*
  // of the same name reads and checks it against its checksums, failing as that read fails
  // (the same errors, the same words), but the bytes go through one buffer of the reader's, so
  // that verifying a file costs reading and hashing its bytes once, with no fresh memory for
  // values that would be dropped at once. A global array's dataset is read once, front to back,
  // for all of its writer blocks. Each returns the bytes it verified. Calls on one reader from
  // several threads take turns (they share the buffer).
  std::uint64_t verify_blob(const std::string& node, const std::string& blob) const;
  std::uint64_t verify_replicated(const std::string& name) const;
  std::uint64_t verify_array(const std::string& name) const;

 private:
  struct EPOCHRUN_HIDDEN Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace epochrun
