// Reading one blob's bytes from a checkpoint file and checking them against the xxh64 the save
// recorded. Internal to the library.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// Reads the blob `record` describes from `offset` of the file open as `fd` and verifies it:
// CorruptCheckpoint naming `what` when the bytes cannot be read or do not match record.xxh64.
Blob read_verified_blob(int fd, const BlobRecord& record, std::uint64_t offset,
                        const std::string& what);

// Reads and verifies the values `records` describes, value k from offsets[k] of the file open as
// `fd`, in that order. A value of 4 MiB or more is read as read_verified_blob reads it; each run
// of smaller values that follow one another in the file (a pack of small blobs) is read straight
// into their memory in a few system calls (preadv), so that thousands of small blobs cost a few
// reads and no extra copy. `what(k)` names value k in an error, and is called only then:
// thousands of names cost more than the reads.
std::vector<Blob> read_verified_blobs(int fd, std::span<const BlobRecord> records,
                                      std::span<const std::uint64_t> offsets,
                                      const std::function<std::string(std::size_t)>& what);

// CorruptCheckpoint naming `what` when `actual` is not record.xxh64.
void check_checksum(std::uint64_t actual, const BlobRecord& record, const std::string& what);

}  // namespace epochrun
