// Names are data: blob, node and job names become HDF5 link names and file names, so they are
// checked before they can address anything outside their group or directory.
#pragma once

#include <string_view>

#include "epochrun/export.hpp"

namespace epochrun {

inline constexpr std::size_t kMaxNameLength = 255;

// Throws UsageError naming `what` ("blob name", "node name"...) unless `name` is 1..255
// characters of printable ASCII other than '/' and '\\', and is neither "." nor "..".
EPOCHRUN_API void validate_name(std::string_view name, std::string_view what);

}  // namespace epochrun
