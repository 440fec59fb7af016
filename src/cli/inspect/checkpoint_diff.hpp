// What differs between two checkpoints (`epochrun inspect DIR --diff A B`): blobs added,
// removed or changed (dtype, shape or checksum), and configuration keys that changed. Compared
// from the files' records alone: no blob is read.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun::cli {

// {"added": [...], "removed": [...], "changed": [...], "unchanged": N, "config_changes": [...]}
// with each blob as "node/blob" and its dtype, shape, bytes and xxh64 on each side.
nlohmann::json diff_checkpoints(const CheckpointHeader& from, const CheckpointHeader& to);

// One line per difference, after a line counting them.
void print_diff(std::ostream& out, const nlohmann::json& diff);

}  // namespace epochrun::cli
