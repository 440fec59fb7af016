#include "bench/verify_bench.hpp"

#include <xxhash.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "bench/median.hpp"
#include "collective_errors.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job.hpp"
#include "file_descriptor.hpp"
#include "inspect/inspect_listing.hpp"
#include "page_cache.hpp"
#include "pending_checkpoint_v3.hpp"
#include "regular_file.hpp"
#include "verified_read.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// The field's rows: 4096 float64 (32 KiB), heat_diffusion's order of size.
constexpr std::uint64_t kColumns = 4096;
// The floor's other read size: the Python reader's pieces, and what "large reads" often means.
constexpr std::size_t kLargePiece = std::size_t{8} << 20;

// `bytes` incompressible bytes, different on every rank (SplitMix64, as random_workspace's).
void fill_random(std::span<std::byte> out, int rank) {
  std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(rank + 1);
  for (std::size_t at = 0; at < out.size(); at += sizeof(std::uint64_t)) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::memcpy(out.data() + at, &z, std::min(sizeof z, out.size() - at));
  }
}

// Collective: the checkpoint measured, as a run of heat_diffusion saves one: every rank's band
// of rows of a float64 field (written with direct I/O, as a synchronous save writes it, so that
// the file starts out of the page cache), a per-node counter and a replicated scalar.
fs::path save_file(const Communicator& comm, const fs::path& directory,
                   std::uint64_t bytes_per_rank) {
  const auto columns = std::max<std::uint64_t>(1, std::min(kColumns, bytes_per_rank / 8));
  const auto rows = std::max<std::uint64_t>(1, bytes_per_rank / (8 * columns));
  const auto ranks = static_cast<std::uint64_t>(comm.size());
  auto blocks = std::make_shared<std::vector<Block>>();
  for (std::uint64_t r = 0; r < ranks; ++r) {
    blocks->push_back(Block{{r * rows, 0}, {rows, columns}});
  }
  Blob band(DType::kF64, {rows, columns});
  fill_random(band.raw(), comm.rank());
  const auto step = Blob::of<std::int64_t>({1}, std::vector<std::int64_t>{comm.rank()});
  const auto time = Blob::of<double>({1}, std::vector<double>{0.5});
  std::vector<SavedBlob> saved;
  saved.push_back(SavedBlob{BlobView{"field", band.dtype(), band.shape(), band.raw(), {}, true, {}},
                            StorageKind::kGlobalArray, Shape{rows * ranks, columns}, blocks});
  saved.push_back(SavedBlob{BlobView{"step", step.dtype(), step.shape(), step.raw(), {}, false, {}},
                            StorageKind::kPerNode,
                            {},
                            {}});
  saved.push_back(SavedBlob{BlobView{"time", time.dtype(), time.shape(), time.raw(), {}, false, {}},
                            StorageKind::kReplicated,
                            {},
                            {}});
  SavedFile root{0, "bench", {}, "{}"};
  for (std::uint64_t r = 0; r < ranks; ++r) {
    root.node_names.push_back(Job::node_name(static_cast<int>(r)));
  }
  const auto file = directory / "verify" / checkpoint_file_name(0);
  run_on_root_then_agree(comm, "bench --verify",
                         [&] { fs::create_directories(file.parent_path()); });
  auto pending =
      PendingCheckpointV3::begin(file, comm, root, std::move(saved), kDefaultSaveTimeout);
  pending.write_data();
  pending.write_arrays();
  pending.finish();
  return file;
}

// What `epochrun inspect FILE --verify` does with the file, its printing aside: the file opened
// and judged, every value read back and checked. Error unless it verified.
void inspect_verify(const fs::path& file) {
  const auto entry = describe_checkpoint(CheckpointChoice{file, std::nullopt},
                                         ListingOptions{.blobs = false, .verify = true});
  if (!entry || !(*entry)["valid"].get<bool>()) {
    throw Error("bench --verify: " + file.string() + " did not verify: " +
                (entry ? (*entry).value("error", std::string()) : std::string("it is gone")));
  }
}

// The floor: the whole file read front to back in reads of buffer.size() into `buffer`, each
// hashed with xxh64 (the routine the verification reads and hashes with).
std::uint64_t read_and_hash(const fs::path& file, std::span<std::byte> buffer) {
  const auto fd = open_regular_file_for_reading(file);
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  hash_file_range(fd.get(), 0, file_size(fd.get()), buffer, state.get(), file.string());
  return XXH64_digest(state.get());
}

// Rank 0 drops the file's pages from the page cache (the save made them durable), so that the
// next read of it comes from the disk; with --cold, the whole page cache goes too.
void drop_file(const Communicator& comm, const fs::path& file, MeasureSettings& settings) {
  before_read(comm, settings);
  run_on_root_then_agree(comm, "drop the file's pages", [&] {
    const FileDescriptor fd(open_regular_file_for_reading(file));
    drop_from_page_cache(fd.get(), 0, 0);
  });
}

// The series of one medium: the verification and its floors.
struct MediumSeries {
  Series verify;
  Series floor;
  Series large;
};

MediumSeries medium_series(const std::string& medium, const std::string& how) {
  return {{"verify_" + medium,
           "epochrun inspect FILE --verify's verification (open, judge, every value read back and "
           "checked), " +
               how,
           {}},
          {"verify_floor_" + medium,
           "the file read whole in reads of " + std::to_string(kVerifyPiece >> 10) +
               " KiB into one buffer, each hashed with xxh64, " + how,
           {}},
          {"verify_floor_8mib_" + medium, "the same in reads of 8 MiB, " + how, {}}};
}

// Each round whose measure or floor took more than twice its median or less than half of it:
// a round of another medium or another machine's load than the others. Flagged, and not met.
void flag_swings(nlohmann::json& row, const std::vector<const Series*>& series) {
  auto flags = row.value("flags", nlohmann::json::array());
  for (const auto* one : series) {
    const double middle = median(one->seconds);
    for (std::size_t round = 0; round < one->seconds.size(); ++round) {
      const double seconds = one->seconds[round];
      if (seconds > 2 * middle || seconds < middle / 2) {
        char text[160];
        std::snprintf(text, sizeof text,
                      "round %zu: %s took %.3f s, more than 2 times off its median %.3f s", round,
                      one->name.c_str(), seconds, middle);
        flags.push_back(text);
      }
    }
  }
  if (!flags.empty()) {
    row["flags"] = std::move(flags);
    row["met"] = false;
  }
}

}  // namespace

nlohmann::json measure_verify(const Communicator& comm, const fs::path& directory,
                              std::uint64_t bytes_per_rank, MeasureSettings& settings) {
  const auto file = save_file(comm, directory, bytes_per_rank);
  double bytes = comm.is_root() ? double(fs::file_size(file)) : 0.0;
  comm.broadcast(bytes);
  auto cold = medium_series("cold", "from the disk (the file's pages dropped before)");
  auto warm = medium_series("warm", "from the page cache");
  // The floors' buffers are made once, outside the timing; the verification makes its own.
  const auto buffer = std::make_unique_for_overwrite<std::byte[]>(kLargePiece);
  const std::span<std::byte> piece(buffer.get(), kVerifyPiece);
  const std::span<std::byte> large(buffer.get(), kLargePiece);
  std::uint64_t digest = 0;
  // One measure of a round: rank 0 reads, the others wait.
  const auto timed_on_root = [&](Series& series, const std::function<void()>& step) {
    series.seconds.push_back(timed(comm, series.name, [&] {
      if (comm.is_root()) {
        step();
      }
    }));
  };
  // A round of one medium's three measures, in the order in_turn gives the round.
  const auto measure_round = [&](std::int64_t round, MediumSeries& s, bool from_disk) {
    const auto before = [&] {
      if (from_disk) {
        drop_file(comm, file, settings);
      }
    };
    in_turn(round, {[&] {
                      before();
                      timed_on_root(s.verify, [&] { inspect_verify(file); });
                    },
                    [&] {
                      before();
                      timed_on_root(s.floor, [&] { digest ^= read_and_hash(file, piece); });
                    },
                    [&] {
                      before();
                      timed_on_root(s.large, [&] { digest ^= read_and_hash(file, large); });
                    }});
  };
  // One verification from the disk first, untimed: in a trial the first after the save took
  // 6.1 s, the median of the rounds after it 1.5 s (the disk still busy with the save's writes).
  drop_file(comm, file, settings);
  run_on_root_then_agree(comm, "bench --verify", [&] { inspect_verify(file); });
  for (std::int64_t round = 0;; ++round) {
    measure_round(round, cold, true);
    // The cold reads left the whole file in the page cache.
    measure_round(round, warm, false);
    if (last_round(settings, round,
                   {ratios(cold.verify, cold.floor), ratios(warm.verify, warm.floor)})) {
      break;
    }
  }
  (void)digest;  // read, so that the floor's hashing is not left out
  run_on_root_then_agree(comm, "remove", [&] { fs::remove_all(file.parent_path()); });
  auto rows = nlohmann::json::array();
  for (auto* s : {&cold, &warm}) {
    auto row = with_target(compare(s->verify, s->floor, bytes), kVerifyTarget);
    flag_swings(row, {&s->verify, &s->floor});
    row["file_bytes"] = bytes;
    rows.push_back(std::move(row));
  }
  for (auto* s : {&cold, &warm}) {
    auto row = compare(s->verify, s->large, bytes);
    row["name"] = s->verify.name + "_over_8mib_reads";
    rows.push_back(std::move(row));
  }
  for (auto* s : {&cold, &warm}) {
    rows.push_back(compare(s->floor, s->floor, bytes));
    rows.push_back(compare(s->large, s->large, bytes));
  }
  return rows;
}

}  // namespace epochrun::cli
