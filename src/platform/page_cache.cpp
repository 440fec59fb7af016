#include "page_cache.hpp"

#include <fcntl.h>

namespace epochrun {

void drop_from_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept {
  (void)::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                        POSIX_FADV_DONTNEED);
}

}  // namespace epochrun
