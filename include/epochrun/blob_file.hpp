// Plain HDF5 files of named blobs, written by one process: for exporting results such as a
// trained model (one dataset per blob at the root, string attributes beside them).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "epochrun/blob.hpp"
#include "epochrun/export.hpp"

namespace epochrun {

// Written atomically: to a temporary sibling, fsynced, then renamed over `file`.
EPOCHRUN_API void write_blob_file(const std::filesystem::path& file,
                                  const std::map<std::string, Blob>& blobs,
                                  const std::map<std::string, std::string>& attributes);

// Reads every dataset at the root of a file written by write_blob_file.
EPOCHRUN_API std::map<std::string, Blob> read_blob_file(const std::filesystem::path& file);

}  // namespace epochrun
