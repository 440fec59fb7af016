// CheckpointReader's side of a version 3 file (docs/FORMAT.md): the header and per-node places
// the reader of versions 1 and 2 already serves per-node blobs from, and the replicated blobs
// only version 3 has (global arrays: global_array_read.hpp). One process, no MPI. Internal to
// the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "checkpoint_layout.hpp"
#include "checkpoint_layout_v3.hpp"
#include "epochrun/blob.hpp"

namespace epochrun {

// The file as CheckpointLayout says it for versions 1 and 2 -- every node's per-node blobs
// (uniform, ragged or packed) with their records and offsets, so that read_blob needs nothing
// new -- plus header.replicated and header.arrays.
CheckpointLayout layout_of_v3(const StoredFileV3& stored);

// The index (in stored.description.blobs) of the blob `name` of `kind`; nullopt when the file
// has none.
std::optional<std::size_t> find_blob_v3(const StoredFileV3& stored, const std::string& name,
                                        StorageKind kind);

// Reads and verifies replicated blob `blob` (an index as find_blob_v3 returns) from the file
// open as `fd`; CorruptCheckpoint naming its dataset when its bytes do not match.
Blob read_replicated_v3(int fd, const StoredFileV3& stored, std::size_t blob);
// The same verified through `scratch`, keeping no byte (verify_stored_blob); returns the bytes
// verified.
std::uint64_t verify_replicated_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                                   std::span<std::byte> scratch);

}  // namespace epochrun
