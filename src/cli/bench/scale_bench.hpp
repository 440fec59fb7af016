// `epochrun bench --scale`: the fixed cost of a checkpoint, the part that does not depend on
// the bytes. A tiny state (--mib-per-rank, 64 KiB by default) is saved and loaded through the
// job's own save and resume path, against a hand-made equivalent done the cheapest way, in the
// same rounds on the same ranks; rank 0's time in each step of the save and of the load, and
// the MPI calls it makes (each collective is O(log ranks) messages in Open MPI's trees; a
// point-to-point call per rank would show as a count that grows with the ranks), are reported
// beside them. Run at growing
// rank counts (scripts/scale_bench.sh), it shows which part grows with the ranks.
//
// The hand-made save: rank 0 creates the file and broadcasts that it did; every rank pwrites
// its bytes at its own offset and fsyncs; an MPI_Gather of one status per rank; rank 0 renames
// the file and fsyncs the directory; an MPI_Bcast of the result. The hand-made load: every
// rank preads its bytes; a gather of one status; a broadcast (after rank 0 found the file and
// broadcast that it did, as a resume finds its checkpoint).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_measures.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// The target: a checkpoint's fixed cost against the hand-made equivalent, at any rank count.
inline constexpr double kScaleTarget = 3.0;
// The job's save of a global array against the bare collective MPI-IO save of it (the design's
// floor for interleaved blocks), in the same rounds.
inline constexpr double kCollectiveFloorTarget = 1.25;
// The lay-out of a file for 100,000 ranks x 10 blobs, in one process: at most this many
// seconds, and this much metadata per 1,000 ranks.
inline constexpr double kLayoutSecondsTarget = 1.0;
inline constexpr double kLayoutMetadataPerThousandRanks = 1024.0 * 1024.0;

// The tiny state --scale saves by default: 64 KiB per rank.
inline constexpr double kScaleMibPerRank = 1.0 / 16;

// --scale's help, with its targets.
std::string scale_help();

// "1000,10000,100000" as numbers ("none": no lay-out); UsageError for anything else (each in
// [1, 1000000]).
std::vector<std::int64_t> parse_layout_ranks(const std::string& text);

// Rank 0: the steps, the MPI calls and the lay-out rows of a --scale run, after the table.
void print_scale(const nlohmann::json& rows);

// Collective: rows scale_save, scale_load, scale_array_save and scale_array_save_seconds (each
// against its hand-made limit, with its target), scale_array_save_vs_collective_floor (the
// array's save against the bare collective MPI-IO save of it), then row scale_steps: rank 0's
// median seconds per step of a save and of a load and of their hand-made equivalents, and the MPI
// calls it made in one of each.
nlohmann::json measure_scale(const Communicator& comm, const std::filesystem::path& directory,
                             std::uint64_t bytes_per_rank, const MeasureSettings& settings);

// One process (call it on rank 0 only): the lay-out of a checkpoint file for each of `ranks`
// nodes with `blobs` per-node blobs of 8 bytes each, as rank 0 lays out a save, timed; with the
// file's bytes that are not the blobs' values (the metadata). Rows layout_<ranks>.
nlohmann::json measure_layout(const std::filesystem::path& directory,
                              const std::vector<std::int64_t>& ranks, std::int64_t blobs);

}  // namespace epochrun::cli
