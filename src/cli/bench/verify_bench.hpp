// `epochrun bench --verify`: `epochrun inspect --verify`'s verification of one checkpoint file
// against the floor of that work, the same file's bytes read in large reads and hashed with
// xxh64, both from the disk (the file's pages dropped from the page cache before each) and from
// the page cache, in rounds whose order alternates.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// The target: a verification against reading and hashing the same bytes.
inline constexpr double kVerifyTarget = 1.25;

// Collective. Every rank saves its band of a float64 global array of `bytes_per_rank` (and a
// per-node and a replicated value, so that every kind of value is verified) into one version 3
// file; rank 0 then times, in alternating order, the verification `epochrun inspect FILE
// --verify` does (the file opened and judged, every value read back and checked) and the floor
// (the file read whole in reads of kVerifyPiece into one buffer, each hashed with xxh64), cold
// and warm. Rows: verify_cold against verify_floor_cold and verify_warm against
// verify_floor_warm (kVerifyTarget, each round whose measure or floor took more than twice or
// less than half its median flagged), the same against the floor in reads of 8 MiB (no target),
// and the floors themselves.
nlohmann::json measure_verify(const Communicator& comm, const std::filesystem::path& directory,
                              std::uint64_t bytes_per_rank, MeasureSettings& settings);

}  // namespace epochrun::cli
