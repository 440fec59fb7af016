#include "fresh_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux's value; older C libraries lack the name
#endif

namespace epochrun {

void populate_for_writing(std::span<std::byte> memory) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(memory.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(memory.data()) + memory.size()) / page * page;
  if (end > begin) {
    // Pages that are resident already are left as they are; any failure only loses the hint.
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  }
}

}  // namespace epochrun
