// A file's range made resident in the page cache before it is written, and dropped from it once
// written and synced.
#pragma once

#include <cstdint>

namespace epochrun {

// Reads the whole pages of [offset, offset + bytes) of the open file `fd` into the page cache in
// one system call (a shared read-only mapping, MADV_POPULATE_READ, Linux 5.14 and later); a range
// not written yet comes in as zeroed pages, without reading the disk. Why: buffered writes into
// one shared file take the file's lock in turns, and a write that finds no cached page allocates
// one under that lock, so the ranks of a collective write pay their fresh pages one after the
// other. Populated first, each rank in its own process and range, the pages are allocated in
// parallel (as writes into one file per rank are) and the writes only copy. Only a hint: any
// failure (a kernel without it, a range past the end of the file) leaves the write to allocate.
void populate_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept;

// Drops the clean cached pages of [offset, offset + bytes) of the open file `fd` (bytes 0: to
// the end of the file) from the page cache (POSIX_FADV_DONTNEED), once they are durable. Why: a
// run never reads its checkpoints back, and pages it keeps make the next save's writes take
// fresh ones from the kernel; on a virtual machine that reports free memory to its host (free
// page reporting), each of those costs a fault in the host, where pages just dropped are reused
// warm. A hint: a failure only leaves the pages cached; dirty pages stay.
void drop_from_page_cache(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept;

}  // namespace epochrun
