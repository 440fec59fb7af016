// Moving a global array from one decomposition to another: each rank holds some pieces of the
// array (blocks, any number per rank) and wants one block; every cell a rank wants is sent to
// it by the rank holding that cell. A resume at another rank count reads the blocks the array
// was written in, verifies them, and redistributes them into the blocks of the new ranks.
// Internal to the library.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {

// One piece of a global array this rank holds: its block and its elements, row-major.
struct HeldPiece {
  Block block;
  std::span<const std::byte> data;
};

// Collective over `comm`. `held_by[r]` lists the blocks rank r holds, in the order rank r passes
// them as `mine` (every rank passes the same `held_by` and `wanted_by`); `wanted_by[r]` is the
// block rank r wants, which this rank receives into `wanted` (its elements, row-major, each
// `element_bytes` long). Point to point: a rank exchanges messages only with the ranks whose
// blocks meet its own, one message each way at most. `in_place`: how many cells of this rank's
// wanted block are in `wanted` already, held by no piece. UsageError when the pieces (and those
// cells) do not hold every wanted cell exactly once or a piece's bytes do not match its block.
void redistribute_blocks(const Communicator& comm, std::size_t element_bytes,
                         const std::vector<std::vector<Block>>& held_by,
                         const std::vector<HeldPiece>& mine, const std::vector<Block>& wanted_by,
                         std::span<std::byte> wanted, std::uint64_t in_place = 0);

}  // namespace epochrun
