// Reading one blob's bytes from a checkpoint file and checking them against the xxh64 the save
// recorded. Internal to the library.
#pragma once

#include <cstdint>
#include <string>

#include "epochrun/blob.hpp"
#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// Reads the blob `record` describes from `offset` of the file open as `fd` and verifies it:
// CorruptCheckpoint naming `what` when the bytes cannot be read or do not match record.xxh64.
Blob read_verified_blob(int fd, const BlobRecord& record, std::uint64_t offset,
                        const std::string& what);

// CorruptCheckpoint naming `what` when `actual` is not record.xxh64.
void check_checksum(std::uint64_t actual, const BlobRecord& record, const std::string& what);

}  // namespace epochrun
