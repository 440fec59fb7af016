// A global array's bytes in a checkpoint: written by every rank with one collective MPI-IO call,
// each writer's block hashed as it is written; read back at any rank count with every writer
// block's hash checked before the bytes are redistributed into the ranks' new blocks
// (docs/FORMAT.md, "Format version 3"). Internal to the library.
//
// Both are collective over the communicator the file was opened with, and agree (bounded by
// `timeout`) after each collective step, so a rank that fails never leaves the others inside
// the next one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/global_array.hpp"
#include "mpi_io_file.hpp"
#include "save_phases.hpp"

namespace epochrun {

// A global array as a checkpoint records it.
struct StoredGlobalArray {
  std::string name;
  StoredArray where;
  std::vector<Block> writer_blocks;         // index = the rank that wrote it
  std::vector<std::uint64_t> writer_xxh64;  // of each writer block's elements, row-major
};

// Collective, with no agreement of its own: this rank's part of the collective write of `data`,
// its `block` of the array at `where`, started towards the disk; returns the xxh64 of those bytes
// (`hashed` when given). The hash's time goes to `phases` as hashing, out of the writing the
// caller times. An MPI-IO error throws on this rank alone once the collective call is made: the
// caller keeps it, still makes every collective call the other ranks make, then agrees. The
// caller checks before that `data` is the block's size (otherwise this throws before the
// collective call, and the other ranks wait in it).
std::uint64_t write_block_collectively(MpiIoFile& file, const StoredArray& where,
                                       const Block& block, std::span<const std::byte> data,
                                       SavePhases& phases,
                                       std::optional<std::uint64_t> hashed = std::nullopt);

// Collective: this rank writes `data`, its `block` of the array at `where`, and returns the
// xxh64 of those bytes (`hashed` when given: an asynchronous snapshot hashes as it copies).
// Every rank throws when any rank failed. `phases`, when given, gets the time of the write, of
// the hash and of the wait for the other ranks.
std::uint64_t write_global_array(const Communicator& comm, MpiIoFile& file,
                                 const StoredArray& where, const Block& block,
                                 std::span<const std::byte> data, const std::string& context,
                                 std::chrono::duration<double> timeout,
                                 SavePhases* phases = nullptr,
                                 std::optional<std::uint64_t> hashed = std::nullopt);

// Collective at any rank count: reads `stored` into `mine`, this rank's block of `wanted_by`
// (index = rank). Each writer block is cut into bands of whole rows at the wanted blocks' row
// boundaries; each band is read by the rank that wants most of it, and each writer block's
// checksum is checked over its bands in order, the hash state passed from one band's reader to
// the next; then the verified bands are redistributed. When the array is read in the blocks it
// was written in, each rank reads its own block straight into `mine`. CorruptCheckpoint on every
// rank, naming the array and the writer block, when a hash does not match.
void read_global_array(const Communicator& comm, MpiIoFile& file, const StoredGlobalArray& stored,
                       const std::vector<Block>& wanted_by, std::span<std::byte> mine,
                       const std::string& context, std::chrono::duration<double> timeout);

}  // namespace epochrun
