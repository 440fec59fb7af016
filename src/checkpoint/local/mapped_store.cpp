#include "mapped_store.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "file_system_kind.hpp"

namespace epochrun {
namespace {

// Copies `bytes` bytes to `to` with non-temporal stores where the CPU has them: the lines go to
// memory without being read into the cache first, and without pushing out of it the piece the
// hash just brought in. Plain stores elsewhere.
void stream_copy(std::byte* to, const std::byte* from, std::size_t bytes) {
#if defined(__SSE2__)
  constexpr std::size_t kLine = 64;
  const auto misaligned = reinterpret_cast<std::uintptr_t>(to) % 16;
  const std::size_t head = misaligned == 0 ? 0 : std::min(bytes, 16 - misaligned);
  std::memcpy(to, from, head);
  std::size_t at = head;
  for (; at + kLine <= bytes; at += kLine) {
    const auto* in = reinterpret_cast<const __m128i*>(from + at);
    auto* out = reinterpret_cast<__m128i*>(to + at);
    const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1), c = _mm_loadu_si128(in + 2),
                  d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(to + at, from + at, bytes - at);
#else
  std::memcpy(to, from, bytes);
#endif
}

// Orders the non-temporal stores before whatever follows (the unmapping, the copy's record).
void fence_stores() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

bool MappedStore::suits(int fd) {
  return file_system_kind(fd).name == "tmpfs";
}

bool MappedStore::suits(const std::filesystem::path& directory) {
  return file_system_kind(directory).name == "tmpfs";
}

MappedStore::MappedStore(int fd, std::string what) : fd_(fd), what_(std::move(what)) {
  // A file with as many bytes allocated as it is long has no hole: a spare written over, whose
  // pages are all there. (Asking the file system to allocate them, fallocate, would walk every
  // page: 16 ms for 256 MiB here, present or not.)
  struct stat status {};
  if (::fstat(fd_, &status) != 0) {
    throw Error(errno_message("stat " + what_));
  }
  if (static_cast<std::uint64_t>(status.st_blocks) * 512 >=
      static_cast<std::uint64_t>(status.st_size)) {
    allocated_ = static_cast<std::uint64_t>(status.st_size);
  }
}

std::uint64_t MappedStore::store(std::uint64_t offset, const BlobView& blob) {
  const auto bytes = blob.bytes;
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                         XXH64_freeState);
  XXH64_reset(state.get(), 0);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (std::uint64_t done = 0; done < bytes.size(); done += kWindow) {
    const auto length = std::min<std::uint64_t>(kWindow, bytes.size() - done);
    const auto start = (offset + done) / page * page;  // a mapping starts at a page
    const auto skip = offset + done - start;
    void* mapped = ::mmap(nullptr, skip + length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                          fd_, static_cast<off_t>(start));
    if (mapped == MAP_FAILED) {
      throw Error(errno_message("map " + what_));
    }
    const auto unmap = [&](void* at) { ::munmap(at, skip + length); };
    const std::unique_ptr<void, decltype(unmap)> window(mapped, unmap);
    auto* to = static_cast<std::byte*>(mapped) + skip;
    for (std::uint64_t at = 0; at < length; at += kPiece) {
      const auto piece = bytes.subspan(done + at, std::min<std::uint64_t>(kPiece, length - at));
      if (!blob.xxh64) {
        XXH64_update(state.get(), piece.data(), piece.size());
      }
      stream_copy(to + at, piece.data(), piece.size());
    }
    fence_stores();
  }
  const auto sum = blob.xxh64 ? *blob.xxh64 : XXH64_digest(state.get());
  if (blob.expected_xxh64 && *blob.expected_xxh64 != sum) {
    throw Error(what_ + ": blob '" + blob.name + "' hashes to " + std::to_string(sum) +
                ", it was made with " + std::to_string(*blob.expected_xxh64) +
                " (it changed since)");
  }
  return sum;
}

}  // namespace epochrun
