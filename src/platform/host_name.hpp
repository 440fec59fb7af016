// The name of the host this process runs on, as the run's records and messages show it.
// Internal to the library.
#pragma once

#include <string>

namespace epochrun {

// gethostname(2), or "unknown" when it fails.
std::string host_name();

}  // namespace epochrun
