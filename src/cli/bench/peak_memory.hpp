// The peak resident memory of this process during one step (what a save or a load costs in
// memory against the state's size). Linux: the kernel's high-water mark VmHWM, reset to the
// current resident size by writing 5 to /proc/self/clear_refs (proc(5)).
#pragma once

#include <cstdint>
#include <functional>

namespace epochrun::cli {

struct PeakMemory {
  std::uint64_t before_bytes = 0;  // resident when the step began (VmRSS)
  std::uint64_t peak_bytes = 0;    // the most resident during the step (VmHWM)
  std::uint64_t added_bytes() const {
    return peak_bytes > before_bytes ? peak_bytes - before_bytes : 0;
  }
};

// Runs `step` between a reset of the high-water mark and its reading. Throws Error where
// /proc/self/clear_refs or /proc/self/status cannot be used.
PeakMemory measure_peak_memory(const std::function<void()>& step);

}  // namespace epochrun::cli
