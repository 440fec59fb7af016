#include "bench/peak_memory.hpp"

#include <fstream>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun::cli {
namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes.
std::uint64_t status_bytes(const std::string& name) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(name + ":", 0) == 0) {
      return std::stoull(line.substr(name.size() + 1)) * 1024;
    }
  }
  throw Error("no " + name + " in /proc/self/status");
}

}  // namespace

PeakMemory measure_peak_memory(const std::function<void()>& step) {
  {
    std::ofstream clear_refs("/proc/self/clear_refs");
    clear_refs << "5\n";
    clear_refs.flush();
    if (!clear_refs) {
      throw Error("cannot reset the peak resident memory (/proc/self/clear_refs)");
    }
  }
  PeakMemory memory;
  memory.before_bytes = status_bytes("VmRSS");
  step();
  memory.peak_bytes = status_bytes("VmHWM");
  return memory;
}

}  // namespace epochrun::cli
