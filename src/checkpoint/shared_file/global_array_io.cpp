#include "global_array_io.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t is complete: a hash state travels between ranks
#include <xxhash.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

#include "block_redistribution.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "seconds_since.hpp"

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

// Where `band` lies in the row-major buffer of `wanted` when it is whole rows of it (all of
// `wanted` in every dimension but the first), so that it can be read straight into place.
std::optional<std::size_t> in_place_offset(const Block& band, const Block& wanted,
                                           std::size_t element_bytes) {
  if (band.element_count() == 0 || !(intersection(band, wanted) == band)) {
    return std::nullopt;
  }
  std::uint64_t row = element_bytes;
  for (std::size_t d = 1; d < band.start.size(); ++d) {
    if (band.start[d] != wanted.start[d] || band.count[d] != wanted.count[d]) {
      return std::nullopt;
    }
    row *= wanted.count[d];
  }
  return (band.start[0] - wanted.start[0]) * row;
}

// Checks every writer block's xxh64 over its bands, held by their readers: the rank holding a
// writer's first band hashes it and passes the hash state on to the holder of the next band,
// which goes on hashing, and so on; the holder of the last band compares. Every rank walks the
// bands in one order that all ranks share, in which each band comes after the one before it in
// its writer block, so that the first band not yet hashed can always be (no cycle of waits,
// whether MPI sends eagerly or not): first bands first, and among bands at the same place the
// ones whose state goes to another rank, so that the next rank does not wait for a whole block
// to be hashed before it gets the state. `held[i]` holds this rank's i-th band in `bands`.
// Returns the first mismatch this rank found.
std::exception_ptr check_bands(const Communicator& comm, const StoredGlobalArray& stored,
                               const std::vector<Band>& bands,
                               const std::vector<std::span<const std::byte>>& held) {
  constexpr int kStateTag = 7301;
  const auto rank = static_cast<std::size_t>(comm.rank());
  struct Step {
    std::size_t place = 0;  // in its writer block: 0 for the first band
    bool passes_on = false;
    std::size_t band = 0;
    std::size_t held = 0;  // this rank's: the index into `held`
  };
  std::vector<Step> steps;
  for (std::size_t i = 0, place = 0, mine = 0; i < bands.size(); ++i) {
    place = i > 0 && bands[i - 1].writer == bands[i].writer ? place + 1 : 0;
    if (bands[i].reader == rank) {
      const bool passes_on = i + 1 < bands.size() && bands[i + 1].writer == bands[i].writer &&
                             bands[i + 1].reader != rank;
      steps.push_back({place, passes_on, i, mine++});
    }
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return std::tuple(a.place, !a.passes_on, a.band) < std::tuple(b.place, !b.passes_on, b.band);
  });
  std::vector<XXH64_state_t> states(stored.writer_blocks.size());
  std::exception_ptr error;
  for (const auto& step : steps) {
    const auto& band = bands[step.band];
    auto& state = states[band.writer];
    const auto state_bytes = std::as_writable_bytes(std::span(&state, 1));
    if (step.place == 0) {
      XXH64_reset(&state, 0);
    } else if (bands[step.band - 1].reader != rank) {
      comm.sendrecv(std::span<const std::byte>(), Communicator::kNoRank, state_bytes,
                    static_cast<int>(bands[step.band - 1].reader), kStateTag);
    }
    XXH64_update(&state, held[step.held].data(), held[step.held].size());
    const bool last = step.band + 1 == bands.size() || bands[step.band + 1].writer != band.writer;
    if (last) {
      if (!error && XXH64_digest(&state) != stored.writer_xxh64[band.writer]) {
        error = std::make_exception_ptr(hash_mismatch(stored, band.writer));
      }
    } else if (step.passes_on) {
      comm.sendrecv(std::span<const std::byte>(state_bytes),
                    static_cast<int>(bands[step.band + 1].reader), std::span<std::byte>(),
                    Communicator::kNoRank, kStateTag);
    }
  }
  return error;
}

// What read_bands read on this rank.
struct BandsRead {
  std::vector<std::span<const std::byte>> bands;  // this rank's, in `read_by[rank]` order
  std::uint64_t in_place = 0;                     // elements of them read straight into `mine`
  std::exception_ptr error;                       // this rank's first failure
};

// Collective: `read_by[r]` lists the bands rank r reads, in collective rounds (as many as the
// most bands one rank reads). A band that is whole rows of this rank's wanted block is read
// straight into `mine`; the others into `buffers`. Each rank reads its largest band first, and
// so on: a collective round lasts as long as its largest read, so rounds of like sizes lose the
// least. A rank that fails a round still takes part in the rounds after it, or the others
// would wait in them forever; its first failure is kept.
BandsRead read_bands(MpiIoFile& file, const StoredGlobalArray& stored,
                     const std::vector<std::vector<Block>>& read_by,
                     const std::vector<Block>& wanted_by, std::size_t rank,
                     std::span<std::byte> mine, std::vector<std::vector<std::byte>>& buffers) {
  std::size_t rounds = 0;
  for (const auto& blocks : read_by) {
    rounds = std::max(rounds, blocks.size());
  }
  const auto& own = read_by[rank];
  std::vector<std::size_t> schedule(own.size());
  std::iota(schedule.begin(), schedule.end(), std::size_t{0});
  std::stable_sort(schedule.begin(), schedule.end(), [&](std::size_t a, std::size_t b) {
    return own[a].element_count() > own[b].element_count();
  });
  BandsRead read;
  read.bands.resize(own.size());
  const std::size_t dimensions = stored.where.global_shape.size();
  const Block nothing{Shape(dimensions, 0), Shape(dimensions, 0)};
  for (std::size_t round = 0; round < rounds; ++round) {
    const bool reading = round < own.size();
    const Block& block = reading ? own[schedule[round]] : nothing;
    const auto bytes = block.element_count() * stored.where.element_bytes;
    const auto offset = in_place_offset(block, wanted_by[rank], stored.where.element_bytes);
    std::span<std::byte> into;
    if (reading && offset) {
      into = mine.subspan(*offset, bytes);
      read.in_place += block.element_count();
    } else {
      into = buffers.emplace_back(bytes);
    }
    try {
      file.read_block_all(stored.where, block, into);
    } catch (...) {
      read.error = read.error ? read.error : std::current_exception();
    }
    if (reading) {
      read.bands[schedule[round]] = into;
    }
  }
  return read;
}

}  // namespace

std::uint64_t write_block_collectively(MpiIoFile& file, const StoredArray& where,
                                       const Block& block, std::span<const std::byte> data,
                                       SavePhases& phases, std::optional<std::uint64_t> hashed) {
  file.write_block_all(where, block, data);
  // Writes to one file take turns in the kernel: a rank done early gets its bytes going to the
  // disk while the others still write (as a plain pwrite + fsync does), and hashes meanwhile.
  file.start_writeback(where, block);
  const auto hashing = std::chrono::steady_clock::now();
  const auto hash = hashed ? *hashed : xxh64(data);
  const double hashing_seconds = seconds_since(hashing);
  phases.add(SavePhase::kHash, hashing_seconds);
  phases.add(SavePhase::kWrite, -hashing_seconds);  // inside the write's time: not writing
  return hash;
}

std::uint64_t write_global_array(const Communicator& comm, MpiIoFile& file,
                                 const StoredArray& where, const Block& block,
                                 std::span<const std::byte> data, const std::string& context,
                                 std::chrono::duration<double> timeout, SavePhases* phases,
                                 std::optional<std::uint64_t> hashed) {
  SavePhases mine;
  const auto agreed = [&](auto&& step) { run_then_agree_within(comm, context, timeout, step); };
  // Every rank's block is checked before any rank enters the collective write.
  timed_step(mine, SavePhase::kWrite, agreed, [&] {
    if (data.size() != block.element_count() * where.element_bytes) {
      throw UsageError("global array block " + block_to_string(block) + " of " +
                       std::to_string(data.size()) + " bytes");
    }
  });
  std::uint64_t hash = 0;
  timed_step(mine, SavePhase::kWrite, agreed,
             [&] { hash = write_block_collectively(file, where, block, data, mine, hashed); });
  if (phases != nullptr) {
    *phases += mine;
  }
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
  // reads), then every writer block's hash is checked over its bands. A band that is whole rows
  // of its reader's wanted block is read straight into place; the others into buffers, from
  // which they are redistributed.
  const auto bands = bands_of(stored.writer_blocks, wanted_by, stored.where.element_bytes);
  std::vector<std::vector<Block>> read_by(ranks);
  std::vector<std::vector<Block>> held_by(ranks);
  for (const auto& band : bands) {
    read_by[band.reader].push_back(band.block);
    if (!in_place_offset(band.block, wanted_by[band.reader], stored.where.element_bytes)) {
      held_by[band.reader].push_back(band.block);
    }
  }
  std::vector<std::vector<std::byte>> buffers;
  BandsRead read;
  run_then_agree_within(comm, context, timeout, [&] {
    read = read_bands(file, stored, read_by, wanted_by, rank, mine, buffers);
    const auto mismatch = check_bands(comm, stored, bands, read.bands);
    if (read.error || mismatch) {
      std::rethrow_exception(read.error ? read.error : mismatch);
    }
  });
  std::vector<HeldPiece> pieces;
  for (std::size_t i = 0, held = 0; i < read.bands.size(); ++i) {
    if (held < held_by[rank].size() && read_by[rank][i] == held_by[rank][held]) {
      pieces.push_back({held_by[rank][held++], read.bands[i]});
    }
  }
  run_then_agree_within(comm, context, timeout, [&] {
    redistribute_blocks(comm, stored.where.element_bytes, held_by, pieces, wanted_by, mine,
                        read.in_place);
  });
}

}  // namespace epochrun
