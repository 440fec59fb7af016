// `epochrun inspect --export DIR`: every blob of one checkpoint as DIR/NODE/BLOB.npy, and in a
// version 3 file each replicated blob once as DIR/replicated/BLOB.npy and each global array
// whole as DIR/arrays/ARRAY.npy, for numpy and everything that reads .npy.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "epochrun/checkpoint_file.hpp"

namespace epochrun::cli {

// Writes every blob of `reader` (each verified by its xxh64 as it is read) into `directory`,
// which must be new or empty (UsageError otherwise: nothing of the user's is overwritten).
// On any failure what was written is removed again, and the error is thrown. Returns the files
// written: [{"blob": "node/blob", "file": "node/blob.npy", "dtype", "shape"}] (version 3 adds
// "replicated/blob" and "arrays/array").
nlohmann::json export_checkpoint(const CheckpointReader& reader,
                                 const std::filesystem::path& directory);

}  // namespace epochrun::cli
