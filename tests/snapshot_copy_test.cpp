#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstddef>
#include <vector>

#include "snapshot_copy.hpp"

namespace epochrun {
namespace {

// Exact copies and the source's xxh64 for sizes around the 256 KiB piece, into destinations at
// several offsets from a 16-byte boundary, writing nothing around them.
TEST(SnapshotCopy, CopiesExactlyAndReturnsTheXxh64OfTheBytes) {
  for (const std::size_t size :
       {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{63}, std::size_t{64},
        std::size_t{65}, std::size_t{4097}, std::size_t{(256 << 10) - 1}, std::size_t{256 << 10},
        std::size_t{(256 << 10) * 3 + 17}}) {
    std::vector<std::byte> from(size);
    for (std::size_t i = 0; i < size; ++i) {
      from[i] = static_cast<std::byte>((i * 131 + size) & 0xff);
    }
    for (std::size_t shift = 0; shift < 16; shift += 5) {
      std::vector<std::byte> buffer(size + 32, std::byte{0xee});
      const std::span<std::byte> to(buffer.data() + shift, size);
      EXPECT_EQ(copy_and_hash(to, from), XXH64(from.data(), from.size(), 0)) << size;
      EXPECT_TRUE(std::equal(to.begin(), to.end(), from.begin())) << size << " at " << shift;
      for (std::size_t i = 0; i < shift; ++i) {
        EXPECT_EQ(buffer[i], std::byte{0xee}) << "wrote before the destination";
      }
      for (std::size_t i = shift + size; i < buffer.size(); ++i) {
        EXPECT_EQ(buffer[i], std::byte{0xee}) << "wrote past the destination";
      }
    }
  }
}

}  // namespace
}  // namespace epochrun
