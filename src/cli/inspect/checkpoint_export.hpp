// `epochrun inspect --export DIR`: every blob of one checkpoint as DIR/NODE/BLOB.npy, for
// numpy and everything that reads .npy.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "epochrun/checkpoint_file.hpp"

namespace epochrun::cli {

// Writes every blob of `reader` (each verified by its xxh64 as it is read) into `directory`,
// which must be new or empty (UsageError otherwise: nothing of the user's is overwritten).
// On any failure what was written is removed again, and the error is thrown. Returns the files
// written: [{"blob": "node/blob", "file": "node/blob.npy", "dtype", "shape"}].
nlohmann::json export_checkpoint(const CheckpointReader& reader,
                                 const std::filesystem::path& directory);

}  // namespace epochrun::cli
