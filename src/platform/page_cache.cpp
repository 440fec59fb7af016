#include "page_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux's value; older C libraries lack the name
#endif

namespace epochrun {

void populate_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = offset / page * page;
  const auto length = offset + bytes - begin;
  if (bytes == 0) {
    return;
  }
  void* mapped = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
  if (mapped == MAP_FAILED) {
    return;
  }
  (void)::madvise(mapped, length, MADV_POPULATE_READ);
  ::munmap(mapped, length);
}

void drop_from_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept {
  (void)::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                        POSIX_FADV_DONTNEED);
}

}  // namespace epochrun
