// Reading one blob's bytes from a checkpoint file and checking them against the xxh64 the save
// recorded. Internal to the library.
#pragma once

#include <xxhash.h>

#include <cstddef>
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

// The bytes a verification that keeps none of them reads at a time, into one buffer it reuses
// (verify_stored_blob, verify_array_v3): small enough that a piece is hashed from the CPU cache
// it was just copied into. Reading a 768 MiB file from the page cache and hashing it took this
// machine's CPU 144 ms in pieces of 256 KiB, 149 ms in pieces of 1 MiB, 167 ms in pieces of
// 4 MiB and 306 ms in pieces of 64 MiB (median of 5 each); 1 MiB also keeps the system calls of
// a read from the disk few. Into fresh memory of the file's size it took 473 to 481 ms: on this
// virtual machine, a page touched for the first time costs a fault in its host as well.
inline constexpr std::size_t kVerifyPiece = std::size_t{1} << 20;

// Feeds [offset, offset + bytes) of the file open as `fd` to `state`, read in pieces of
// scratch.size() bytes into `scratch`, each hashed while it is still in the CPU cache. Throws
// as read_at does (`what` names the bytes).
void hash_file_range(int fd, std::uint64_t offset, std::uint64_t bytes,
                     std::span<std::byte> scratch, XXH64_state_t* state, const std::string& what);

// Verifies the value `record` describes at `offset` of the file open as `fd` as
// read_verified_blob does, with the same errors, but keeps none of its bytes: they pass through
// `scratch` (at least 1 byte; kVerifyPiece is the size meant) piece by piece. What verifying a
// file costs is then what reading and hashing its bytes costs, with no fresh memory for a value
// that is dropped at once.
void verify_stored_blob(int fd, const BlobRecord& record, std::uint64_t offset,
                        const std::string& what, std::span<std::byte> scratch);

}  // namespace epochrun
