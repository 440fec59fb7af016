#include "snapshot_copy.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace epochrun {
namespace {

// Fits the caches the hash leaves it in, so the copy reads it from there.
constexpr std::size_t kPiece = 256 << 10;

}  // namespace

std::uint64_t copy_and_hash(std::span<std::byte> to, std::span<const std::byte> from) {
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                         XXH64_freeState);
  XXH64_reset(state.get(), 0);
  for (std::size_t at = 0; at < from.size(); at += kPiece) {
    const auto length = std::min(kPiece, from.size() - at);
    XXH64_update(state.get(), from.data() + at, length);
    std::memcpy(to.data() + at, from.data() + at, length);
  }
  return XXH64_digest(state.get());
}

}  // namespace epochrun
