// The asynchronous saver's snapshot of one blob: a copy that is also its checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace epochrun {

// Copies `from` into `to` (same size) and returns the bytes' xxh64, piece by piece, each piece
// hashed from the source and then copied while it is in the CPU cache: one pass over memory.
// (Non-temporal stores made the copy alone faster, 24 ms instead of 34 ms for 256 MiB, but in
// heat_diffusion, alternated with this copy, they made no difference beyond the noise:
// docs/benchmarks-history.md, "What a checkpoint every epoch costs a job".)
std::uint64_t copy_and_hash(std::span<std::byte> to, std::span<const std::byte> from);

}  // namespace epochrun
