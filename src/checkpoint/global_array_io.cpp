#include "global_array_io.hpp"

#include <xxhash.h>

#include "block_redistribution.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {

namespace {

std::uint64_t xxh64(std::span<const std::byte> data) {
  return XXH64(data.data(), data.size(), 0);
}

void check_hash(const StoredGlobalArray& stored, std::size_t writer,
                std::span<const std::byte> data) {
  if (xxh64(data) != stored.writer_xxh64.at(writer)) {
    throw CorruptCheckpoint("global array '" + stored.name + "': the block " +
                            block_to_string(stored.writer_blocks[writer]) + " written by rank " +
                            std::to_string(writer) + " does not match its checksum");
  }
}

// Reads writer block `writer` (or, past the last writer, takes part reading nothing).
std::vector<std::byte> read_writer_block(MpiIoFile& file, const StoredGlobalArray& stored,
                                         std::size_t writer) {
  const std::size_t dimensions = stored.where.global_shape.size();
  const Block nothing{Shape(dimensions, 0), Shape(dimensions, 0)};
  const Block& block =
      writer < stored.writer_blocks.size() ? stored.writer_blocks[writer] : nothing;
  std::vector<std::byte> data(block.element_count() * stored.where.element_bytes);
  file.read_block_all(stored.where, block, data);
  return data;
}

// Which rank reads each writer block: the one whose wanted block holds most of it, among those
// the one with the fewest bytes to read so far (so that the reads stay balanced when the
// decompositions agree on nothing), the lowest of those.
std::vector<std::size_t> readers_of(const std::vector<Block>& writer_blocks,
                                    const std::vector<Block>& wanted_by,
                                    std::size_t element_bytes) {
  std::vector<std::uint64_t> load(wanted_by.size(), 0);
  std::vector<std::size_t> readers;
  for (const auto& block : writer_blocks) {
    std::size_t best = 0;
    std::uint64_t best_overlap = 0;
    for (std::size_t rank = 0; rank < wanted_by.size(); ++rank) {
      const auto overlap = intersection(block, wanted_by[rank]).element_count();
      if (overlap > best_overlap || (overlap == best_overlap && load[rank] < load[best])) {
        best = rank;
        best_overlap = overlap;
      }
    }
    readers.push_back(best);
    load[best] += block.element_count() * element_bytes;
  }
  return readers;
}

}  // namespace

std::uint64_t write_global_array(const Communicator& comm, MpiIoFile& file,
                                 const StoredArray& where, const Block& block,
                                 std::span<const std::byte> data, const std::string& context,
                                 std::chrono::duration<double> timeout) {
  // Every rank's block is checked before any rank enters the collective write.
  run_then_agree_within(comm, context, timeout, [&] {
    if (data.size() != block.element_count() * where.element_bytes) {
      throw UsageError("global array block " + block_to_string(block) + " of " +
                       std::to_string(data.size()) + " bytes");
    }
  });
  std::uint64_t hash = 0;
  run_then_agree_within(comm, context, timeout, [&] {
    file.write_block_all(where, block, data);
    hash = xxh64(data);
  });
  return hash;
}

void read_global_array(const Communicator& comm, MpiIoFile& file, const StoredGlobalArray& stored,
                       const std::vector<Block>& wanted_by, std::span<std::byte> mine,
                       const std::string& context, std::chrono::duration<double> timeout) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  const std::size_t writers = stored.writer_blocks.size();
  if (stored.writer_xxh64.size() != writers || wanted_by.size() != ranks) {
    throw UsageError("read_global_array: " + std::to_string(writers) + " writer blocks, " +
                     std::to_string(stored.writer_xxh64.size()) + " checksums, " +
                     std::to_string(wanted_by.size()) + " wanted blocks at " +
                     std::to_string(ranks) + " ranks");
  }
  if (stored.writer_blocks == wanted_by) {
    run_then_agree_within(comm, context, timeout, [&] {
      file.read_block_all(stored.where, wanted_by[rank], mine);
      check_hash(stored, rank, mine);
    });
    return;
  }
  // Each writer block is read by the rank that wants most of it (few bytes move afterwards);
  // as many collective rounds as the most blocks one rank reads.
  const auto readers = readers_of(stored.writer_blocks, wanted_by, stored.where.element_bytes);
  std::vector<std::vector<std::size_t>> reads(ranks);
  std::vector<std::vector<Block>> held_by(ranks);
  for (std::size_t writer = 0; writer < writers; ++writer) {
    reads[readers[writer]].push_back(writer);
    held_by[readers[writer]].push_back(stored.writer_blocks[writer]);
  }
  std::size_t rounds = 0;
  for (const auto& mine_to_read : reads) {
    rounds = std::max(rounds, mine_to_read.size());
  }
  std::vector<std::vector<std::byte>> held;
  run_then_agree_within(comm, context, timeout, [&] {
    // A rank that fails a round still takes part in the rounds after it, or the others would
    // wait in them forever; its first failure is raised once all rounds are done.
    std::exception_ptr error;
    for (std::size_t round = 0; round < rounds; ++round) {
      const bool reading = round < reads[rank].size();
      try {
        auto data = read_writer_block(file, stored, reading ? reads[rank][round] : writers);
        if (reading && !error) {
          check_hash(stored, reads[rank][round], data);
          held.push_back(std::move(data));
        }
      } catch (...) {
        error = error ? error : std::current_exception();
      }
    }
    if (error) {
      std::rethrow_exception(error);
    }
  });
  std::vector<HeldPiece> pieces;
  for (std::size_t i = 0; i < held.size(); ++i) {
    pieces.push_back({held_by[rank][i], held[i]});
  }
  run_then_agree_within(comm, context, timeout, [&] {
    redistribute_blocks(comm, stored.where.element_bytes, held_by, pieces, wanted_by, mine);
  });
}

}  // namespace epochrun
