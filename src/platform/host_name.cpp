#include "host_name.hpp"

#include <unistd.h>

#include <climits>

namespace epochrun {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

}  // namespace epochrun
