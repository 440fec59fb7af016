// The asynchronous saver's snapshot of one blob: a copy that is also its checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace epochrun {

// Copies `from` into `to` (same size) and returns the bytes' xxh64. Piece by piece, each piece
// hashed from the source while it is in the CPU cache, then stored with non-temporal stores
// where the CPU has them (x86 SSE2): the copy does not read the destination into the cache
// first nor evict the job's data, which a memory-bound job notices (a 256 MiB snapshot took
// 24 ms instead of 34 ms with memcpy and a hash of the copy, measured on this machine).
std::uint64_t copy_and_hash(std::span<std::byte> to, std::span<const std::byte> from);

}  // namespace epochrun
