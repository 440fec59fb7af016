// What `epochrun bench` measures, each against its limit on the same ranks in the same rounds,
// and the targets --targets holds the ratios to (README "Benchmark", docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "epochrun/communicator.hpp"

namespace epochrun::cli {

struct MeasureSettings {
  std::int64_t rounds = 5;       // at least
  std::int64_t max_rounds = 15;  // at most, while a target's ratio is not stable
  bool cold = false;             // drop the page cache before every read; cleared when it cannot
};

// The targets: a ratio (measure / limit, median of the rounds) at most its target is MET.
inline constexpr double kSaveTarget = 1.11;        // save vs pwrite + fsync
inline constexpr double kSaveHintedTarget = 1.10;  // save vs pwrite + writeback hints + fsync
inline constexpr double kLoadTarget = 1.25;        // load vs pread into fresh buffers
inline constexpr double kSmallBlobsTarget = 2.0;   // many 1 KiB blobs vs the same bytes as one
inline constexpr double kCommitCostTarget = 1.2;   // a commit after 3,000 epochs vs after 10

// A target row is flagged, and not met, when its limit's slowest round took more than this many
// times its fastest, or when it is a load whose ratio is under kLoadRatioFlag.
inline constexpr double kLimitSpreadFlag = 2.0;
inline constexpr double kLoadRatioFlag = 0.8;

// `row` (a compare() row) with its "target" and whether its ratio "met" it; "flags" says why a
// row whose ratio is within its target is not met (see kLimitSpreadFlag).
nlohmann::json with_target(nlohmann::json row, double target);

// Collective: drops the page cache before a read when settings.cold asks for it; where it
// cannot, says so once (rank 0) and clears settings.cold.
void before_read(const Communicator& comm, MeasureSettings& settings);

// Whether round `round` (from 0) is the last: the minimum is done and every ratio in `ratios`
// (per round, measure over limit) has a stable median (median_is_stable), or the maximum is
// reached.
bool last_round(const MeasureSettings& settings, std::int64_t round,
                const std::vector<std::vector<double>>& ratios);

// Save and load of `bytes_per_rank` in `blobs` blobs against pwrite + fsync of one file per
// rank (and the same with writeback hints) and pread into fresh buffers: rows save,
// save_vs_hinted_write, load, write_limit, write_limit_hinted, read_limit; then the peak
// resident memory of one save and one load against the state (rows save_memory, load_memory).
// `targets`: the save and load rows carry "target" and "met". Rounds go on until the save's
// and the load's ratios are stable (last_round).
nlohmann::json measure_disk(const Communicator& comm, const std::filesystem::path& directory,
                            std::uint64_t bytes_per_rank, std::int64_t blobs,
                            MeasureSettings& settings, bool targets);

// `count` blobs of 1 KiB per rank against the same bytes as one blob, saved and loaded: rows
// save_small_blobs and load_small_blobs with their targets.
nlohmann::json measure_small_blobs(const Communicator& comm, const std::filesystem::path& directory,
                                   std::int64_t count, MeasureSettings& settings);

// The cost of committing a tiny checkpoint (the save and rank 0's index.json, as a run commits)
// into a directory holding `history` committed epochs against one holding 10 (both built
// first, one real commit each): row commit_with_history with its target. Each round times
// `commits` commits into each directory and removes them again.
nlohmann::json measure_commit_cost(const Communicator& comm, const std::filesystem::path& directory,
                                   std::int64_t history, std::int64_t commits,
                                   const MeasureSettings& settings);

}  // namespace epochrun::cli
