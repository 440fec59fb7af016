// The JSON of a run's summary (`--summary-json`). Internal to the library and the program.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "epochrun/run_summary.hpp"

namespace epochrun {

// A blob in JSON: dtype, shape, xxh64, and its values when it has at most
// `kSummaryMaxValues` elements (opaque bytes are never expanded).
inline constexpr std::uint64_t kSummaryMaxValues = 1024;
nlohmann::json blob_to_json(const Blob& blob);

nlohmann::json to_json(const RunSummary& summary);

}  // namespace epochrun
