#include "snapshot_copy.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace epochrun {
namespace {

// Fits the caches the hash leaves it in, so the copy reads it from there.
constexpr std::size_t kPiece = 256 << 10;

void stream_copy(std::byte* to, const std::byte* from, std::size_t size) {
  std::size_t at = 0;
#if defined(__SSE2__)
  // Non-temporal stores need a 16-byte-aligned destination: plain copy up to it.
  const auto misaligned = reinterpret_cast<std::uintptr_t>(to) % 16;
  const std::size_t head = misaligned == 0 ? 0 : std::min(size, 16 - misaligned);
  std::memcpy(to, from, head);
  at = head;
  for (; at + 64 <= size; at += 64) {
    const auto* source = reinterpret_cast<const __m128i*>(from + at);
    auto* target = reinterpret_cast<__m128i*>(to + at);
    const __m128i a = _mm_loadu_si128(source);
    const __m128i b = _mm_loadu_si128(source + 1);
    const __m128i c = _mm_loadu_si128(source + 2);
    const __m128i d = _mm_loadu_si128(source + 3);
    _mm_stream_si128(target, a);
    _mm_stream_si128(target + 1, b);
    _mm_stream_si128(target + 2, c);
    _mm_stream_si128(target + 3, d);
  }
#endif
  std::memcpy(to + at, from + at, size - at);
}

}  // namespace

std::uint64_t copy_and_hash(std::span<std::byte> to, std::span<const std::byte> from) {
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                         XXH64_freeState);
  XXH64_reset(state.get(), 0);
  for (std::size_t at = 0; at < from.size(); at += kPiece) {
    const auto length = std::min(kPiece, from.size() - at);
    XXH64_update(state.get(), from.data() + at, length);
    stream_copy(to.data() + at, from.data() + at, length);
  }
#if defined(__SSE2__)
  _mm_sfence();  // the streamed stores are visible to the writer thread started next
#endif
  return XXH64_digest(state.get());
}

}  // namespace epochrun
