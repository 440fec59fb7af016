#include "hdf5_checksum.hpp"

#include <algorithm>

namespace epochrun {

namespace {

std::uint32_t rot(std::uint32_t x, int k) {
  return (x << k) | (x >> (32 - k));
}

// One line of lookup3's mix and final rounds.
void mix_step(std::uint32_t& x, std::uint32_t& y, std::uint32_t& z, int k) {
  x -= y;
  x ^= rot(y, k);
  y += z;
}

void final_step(std::uint32_t& x, std::uint32_t& y, int k) {
  x ^= y;
  x -= rot(y, k);
}

// The `n` (at most 4) bytes at `at`, little-endian.
std::uint32_t word(std::span<const std::byte> bytes, std::size_t at, std::size_t n) {
  std::uint32_t w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    w += static_cast<std::uint32_t>(bytes[at + i]) << (8 * i);
  }
  return w;
}

}  // namespace

std::uint32_t hdf5_metadata_checksum(std::span<const std::byte> bytes) {
  std::uint32_t a = 0xdeadbeef + static_cast<std::uint32_t>(bytes.size());
  std::uint32_t b = a;
  std::uint32_t c = a;
  std::size_t at = 0;
  for (; bytes.size() - at > 12; at += 12) {
    a += word(bytes, at, 4);
    b += word(bytes, at + 4, 4);
    c += word(bytes, at + 8, 4);
    mix_step(a, c, b, 4);
    mix_step(b, a, c, 6);
    mix_step(c, b, a, 8);
    mix_step(a, c, b, 16);
    mix_step(b, a, c, 19);
    mix_step(c, b, a, 4);
  }
  const auto left = bytes.size() - at;
  if (left == 0) {
    return c;
  }
  a += word(bytes, at, std::min<std::size_t>(left, 4));
  b += left > 4 ? word(bytes, at + 4, std::min<std::size_t>(left - 4, 4)) : 0;
  c += left > 8 ? word(bytes, at + 8, left - 8) : 0;
  final_step(c, b, 14);
  final_step(a, c, 11);
  final_step(b, a, 25);
  final_step(c, b, 16);
  final_step(a, c, 4);
  final_step(b, a, 14);
  final_step(c, b, 24);
  return c;
}

}  // namespace epochrun
