// What the checkpoint layout's writer and readers share. Internal to checkpoint_layout.
#pragma once

#include <string>

#include "h5_handle.hpp"

namespace epochrun {

// The file access list every checkpoint file is created and opened with.
h5::Handle checkpoint_file_access();

// "/nodes/<node>/<blob>".
std::string dataset_path(const std::string& node, const std::string& blob);

}  // namespace epochrun
