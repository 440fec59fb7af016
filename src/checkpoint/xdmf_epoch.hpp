// A committed checkpoint as the XDMF file describes it (format/xdmf_collection.hpp): its global
// arrays, read from its verified header and layout (no value is read), and its file named as
// the XDMF file reaches it.
#pragma once

#include <filesystem>

#include "xdmf_collection.hpp"

namespace epochrun {

// The epoch is the one the file records. Throws as CheckpointReader does for a file that is
// damaged or gone.
XdmfEpoch xdmf_epoch(const std::filesystem::path& checkpoint,
                     const std::filesystem::path& xdmf_file);

}  // namespace epochrun
