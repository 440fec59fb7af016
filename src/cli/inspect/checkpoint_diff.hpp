// What differs between two checkpoints (`epochrun inspect DIR --diff A B`): blobs added,
// removed or changed (dtype, shape or checksum), and configuration keys that changed. Compared
// from the files' records alone -- except version 3's global arrays written in other blocks,
// whose writer checksums cannot be compared: those are compared whole, by their values.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun::cli {

// Whether two global arrays of one name, dtype and shape hold the same values (read whole).
using SameArrayValues =
    std::function<bool(const GlobalArrayRecord& from, const GlobalArrayRecord& to)>;

// {"added": [...], "removed": [...], "changed": [...], "unchanged": N, "config_changes": [...]}
// with each blob as "node/blob" and its dtype, shape, bytes and xxh64 on each side; version 3
// adds "replicated/blob" (so) and "arrays/array" (dtype, global shape, bytes, writer blocks).
// Two arrays of the same writer blocks are the same when every block's xxh64 is; arrays of
// other blocks are asked of `same_values` (none: they count as changed).
nlohmann::json diff_checkpoints(const CheckpointHeader& from, const CheckpointHeader& to,
                                const SameArrayValues& same_values = {});

// One line per difference, after a line counting them.
void print_diff(std::ostream& out, const nlohmann::json& diff);

}  // namespace epochrun::cli
