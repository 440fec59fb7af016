#include "global_array_io.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t is complete: a hash state travels between ranks
#include <xxhash.h>

#include <algorithm>

#include "block_redistribution.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {

namespace {

std::uint64_t xxh64(std::span<const std::byte> data) {
  return XXH64(data.data(), data.size(), 0);
}

CorruptCheckpoint hash_mismatch(const StoredGlobalArray& stored, std::size_t writer) {
  return CorruptCheckpoint("global array '" + stored.name + "': the block " +
                           block_to_string(stored.writer_blocks[writer]) + " written by rank " +
                           std::to_string(writer) + " does not match its checksum");
}

void check_hash(const StoredGlobalArray& stored, std::size_t writer,
                std::span<const std::byte> data) {
  if (xxh64(data) != stored.writer_xxh64.at(writer)) {
    throw hash_mismatch(stored, writer);
  }
}

// A band of a writer block: whole rows of it (along the first dimension), so its bytes are one
// run of the block's row-major bytes, which its reader hashes in turn with the other bands'.
struct Band {
  std::size_t writer = 0;
  Block block;
  std::size_t reader = 0;
};

// The writer blocks cut into bands at the row boundaries of the wanted blocks, each band read by
// the rank whose wanted block holds most of it (among those, the one with the fewest bytes to
// read so far, then the lowest): in the usual re-partitionings a band is all in one rank's new
// block, every rank reads about its share, and few bytes move afterwards. In writer order, each
// writer's bands in row order.
std::vector<Band> bands_of(const std::vector<Block>& writer_blocks,
                           const std::vector<Block>& wanted_by, std::size_t element_bytes) {
  std::vector<std::uint64_t> load(wanted_by.size(), 0);
  std::vector<Band> bands;
  for (std::size_t writer = 0; writer < writer_blocks.size(); ++writer) {
    const Block& whole = writer_blocks[writer];
    if (whole.element_count() == 0) {
      continue;
    }
    const auto first = whole.start[0];
    const auto end = first + whole.count[0];
    std::vector<std::uint64_t> cuts = {first, end};
    for (const auto& wanted : wanted_by) {
      for (const auto row : {wanted.start[0], wanted.start[0] + wanted.count[0]}) {
        if (wanted.element_count() > 0 && row > first && row < end) {
          cuts.push_back(row);
        }
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      Band band{writer, whole, 0};
      band.block.start[0] = cuts[i];
      band.block.count[0] = cuts[i + 1] - cuts[i];
      std::uint64_t most = 0;
      for (std::size_t rank = 0; rank < wanted_by.size(); ++rank) {
        const auto overlap = intersection(band.block, wanted_by[rank]).element_count();
        if (overlap > most || (overlap == most && load[rank] < load[band.reader])) {
          band.reader = rank;
          most = overlap;
        }
      }
      load[band.reader] += band.block.element_count() * element_bytes;
      bands.push_back(std::move(band));
    }
  }
  return bands;
}

// Checks every writer block's xxh64 over its bands, held by their readers: the rank holding a
// writer's first band hashes it and passes the hash state on to the holder of the next band,
// which goes on hashing, and so on; the holder of the last band compares. Every rank walks the
// bands in the same order, so each waits only for a band earlier in it. `held[i]` holds this
// rank's i-th band in that order. Returns the first mismatch this rank found.
std::exception_ptr check_bands(const Communicator& comm, const StoredGlobalArray& stored,
                               const std::vector<Band>& bands,
                               const std::vector<std::vector<std::byte>>& held) {
  constexpr int kStateTag = 7301;
  const auto rank = static_cast<std::size_t>(comm.rank());
  XXH64_state_t state;
  std::exception_ptr error;
  std::size_t next_held = 0;
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const auto& band = bands[i];
    if (band.reader != rank) {
      continue;
    }
    const bool first = i == 0 || bands[i - 1].writer != band.writer;
    const bool last = i + 1 == bands.size() || bands[i + 1].writer != band.writer;
    const auto state_bytes = std::as_writable_bytes(std::span(&state, 1));
    if (first) {
      XXH64_reset(&state, 0);
    } else if (bands[i - 1].reader != rank) {
      comm.sendrecv(std::span<const std::byte>(), Communicator::kNoRank, state_bytes,
                    static_cast<int>(bands[i - 1].reader), kStateTag);
    }
    const auto& data = held[next_held++];
    XXH64_update(&state, data.data(), data.size());
    if (last) {
      if (!error && XXH64_digest(&state) != stored.writer_xxh64[band.writer]) {
        error = std::make_exception_ptr(hash_mismatch(stored, band.writer));
      }
    } else if (bands[i + 1].reader != rank) {
      comm.sendrecv(std::span<const std::byte>(state_bytes), static_cast<int>(bands[i + 1].reader),
                    std::span<std::byte>(), Communicator::kNoRank, kStateTag);
    }
  }
  return error;
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
  // Each band is read by its reader in collective rounds (as many as the most bands one rank
  // reads), then every writer block's hash is checked over its bands.
  const auto bands = bands_of(stored.writer_blocks, wanted_by, stored.where.element_bytes);
  std::vector<std::vector<Block>> held_by(ranks);
  for (const auto& band : bands) {
    held_by[band.reader].push_back(band.block);
  }
  std::size_t rounds = 0;
  for (const auto& blocks : held_by) {
    rounds = std::max(rounds, blocks.size());
  }
  std::vector<std::vector<std::byte>> held;
  run_then_agree_within(comm, context, timeout, [&] {
    // A rank that fails a round still takes part in the rounds and the hash chain after it, or
    // the others would wait in them forever; its first failure is raised once all are done.
    std::exception_ptr error;
    const std::size_t dimensions = stored.where.global_shape.size();
    const Block nothing{Shape(dimensions, 0), Shape(dimensions, 0)};
    for (std::size_t round = 0; round < rounds; ++round) {
      const Block& block = round < held_by[rank].size() ? held_by[rank][round] : nothing;
      std::vector<std::byte> data(block.element_count() * stored.where.element_bytes);
      try {
        file.read_block_all(stored.where, block, data);
      } catch (...) {
        error = error ? error : std::current_exception();
      }
      if (round < held_by[rank].size()) {
        held.push_back(std::move(data));
      }
    }
    const auto mismatch = check_bands(comm, stored, bands, held);
    if (error || mismatch) {
      std::rethrow_exception(error ? error : mismatch);
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
