// How `epochrun inspect` shows a version 3 file's global arrays: the global shape and how the
// writing ranks split it (their blocks, and the process grid when the blocks are one).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun::cli {

// {"name", "dtype", "shape" (global), "bytes", "writers", "blocks": [{"start", "count",
// "xxh64"}], "process_grid" (ranks per dimension; only when the blocks are those of a grid)}.
nlohmann::json array_json(const GlobalArrayRecord& array);

// One line for the array, then one per writer block, indented by `indent`.
void print_array(std::ostream& out, const nlohmann::json& array, const std::string& indent);

}  // namespace epochrun::cli
