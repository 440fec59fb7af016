// Elapsed wall time for log lines, metrics and the time budget.
#pragma once

#include <chrono>

namespace epochrun {

// Seconds from `start` until now, on the monotonic clock (immune to the wall clock's jumps).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace epochrun
