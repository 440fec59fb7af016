// A committed checkpoint as the XDMF file describes it (format/xdmf_collection.hpp): its global
// arrays, read from its verified header and layout (no value is read), and its file named as
// the XDMF file reaches it.
#pragma once

#include <filesystem>
#include <optional>

#include "xdmf_collection.hpp"

namespace epochrun {

// Through CheckpointReader: any format version. The epoch is the one the file records. Throws
// as CheckpointReader does for a file that is damaged or gone.
XdmfEpoch xdmf_epoch(const std::filesystem::path& checkpoint,
                     const std::filesystem::path& xdmf_file);

// From the file's layout record alone (docs/FORMAT.md, "The layout record"), read with pread
// under its own checksum: no HDF5 call, so a thread beside the job's may make it (libhdf5 is not
// thread-safe, and the job's thread lays its next save out with it). Nothing for a file without
// a record (written before it, or of a layout too large for it). Throws CheckpointError for a
// file that is damaged or gone.
std::optional<XdmfEpoch> xdmf_epoch_without_hdf5(const std::filesystem::path& checkpoint,
                                                 const std::filesystem::path& xdmf_file);

}  // namespace epochrun
