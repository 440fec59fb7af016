// A file's written range dropped from the page cache once it is durable.
#pragma once

#include <cstdint>

namespace epochrun {

// Drops the clean cached pages of [offset, offset + bytes) of the open file `fd` (bytes 0: to
// the end of the file) from the page cache (POSIX_FADV_DONTNEED), once they are durable. Why: a
// run never reads its checkpoints back, and pages it keeps make the next save's writes take
// fresh ones from the kernel; on a virtual machine that reports free memory to its host (free
// page reporting), each of those costs a fault in the host, where pages just dropped are reused
// warm. A hint: a failure only leaves the pages cached; dirty pages stay.
void drop_from_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept;

}  // namespace epochrun
