// A global array of a version 3 file read by one process, with no MPI (CheckpointReader,
// `epochrun inspect`): the whole array or any block of it, every byte returned verified.
// Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "checkpoint_layout_v3.hpp"
#include "epochrun/blob.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {

// The cells of `part` of global array `blob` (index in stored.description.blobs), row-major,
// from the file open as `fd`: every writer block `part` meets is read whole and its xxh64
// checked (CorruptCheckpoint naming the array and the block); the hash covers a writer's block,
// not a cell, so there is no cheaper way to verify a cell. A block wholly inside `part` is read
// straight into the result, hashed as it arrives; of any other, the cells `part` holds are
// copied once it is verified. The whole array when `part` is empty; UsageError for a part of
// other dimensions or outside it.
Blob read_array_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                   const std::optional<Block>& part);

// Verifies every writer block of global array `blob` of the file open as `fd`, keeping none of
// its bytes: its dataset read once, front to back, in pieces of scratch.size() bytes into
// `scratch` (kVerifyPiece is the size meant), each piece's runs of each block fed to that
// block's hash while they are in the CPU cache -- one pass over the file whatever the blocks'
// shapes, where verifying block after block would read a block of columns' rows once per block.
// A block of no cells is not checked (read_array_v3 reads nothing of it). CorruptCheckpoint as
// read_array_v3 words it, for the first writer block (in writer order) that does not match.
// Returns the bytes verified.
std::uint64_t verify_array_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                              std::span<std::byte> scratch);

}  // namespace epochrun
