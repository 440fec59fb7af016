#include "xor_parity.hpp"

#include <algorithm>
#include <cstring>

#include "epochrun/errors.hpp"

namespace epochrun {

ParityLayout ParityLayout::of(int members, std::uint64_t largest_part) {
  if (members < 2) {
    throw Error("an XOR set needs two members at least, not " + std::to_string(members));
  }
  const auto others = static_cast<std::uint64_t>(members - 1);
  return {members, (largest_part + others - 1) / others};
}

void xor_into(std::span<std::byte> target, std::span<const std::byte> source) {
  const auto count = std::min(target.size(), source.size());
  auto* __restrict out = reinterpret_cast<unsigned char*>(target.data());
  const auto* __restrict in = reinterpret_cast<const unsigned char*>(source.data());
  // Four 8-byte words at a time (the compiler keeps them in vector registers), then the rest.
  std::size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    std::uint64_t a[4], b[4];
    std::memcpy(a, out + i, 32);
    std::memcpy(b, in + i, 32);
    for (int k = 0; k < 4; ++k) {
      a[k] ^= b[k];
    }
    std::memcpy(out + i, a, 32);
  }
  for (; i < count; ++i) {
    out[i] ^= in[i];
  }
}

void padded_bytes(std::span<const std::byte> part, std::uint64_t offset, std::span<std::byte> out) {
  const auto available =
      offset < part.size() ? std::min<std::uint64_t>(part.size() - offset, out.size()) : 0;
  if (available > 0) {
    std::memcpy(out.data(), part.data() + offset, available);
  }
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(available), out.end(), std::byte{0});
}

namespace {

std::uint64_t largest(const std::vector<std::vector<std::byte>>& parts, std::uint64_t also) {
  std::uint64_t most = also;
  for (const auto& part : parts) {
    most = std::max<std::uint64_t>(most, part.size());
  }
  return most;
}

}  // namespace

std::vector<std::vector<std::byte>> parity_blocks(
    const std::vector<std::vector<std::byte>>& parts) {
  const auto n = static_cast<int>(parts.size());
  const auto layout = ParityLayout::of(n, largest(parts, 0));
  std::vector<std::vector<std::byte>> blocks(n, std::vector<std::byte>(layout.segment));
  std::vector<std::byte> segment(layout.segment);
  for (int holder = 0; holder < n; ++holder) {
    for (int member = 0; member < n; ++member) {
      if (member != holder) {
        padded_bytes(parts[member], layout.segment_for(member, holder) * layout.segment, segment);
        xor_into(blocks[holder], segment);
      }
    }
  }
  return blocks;
}

std::vector<std::byte> rebuilt_part(const std::vector<std::vector<std::byte>>& parts,
                                    const std::vector<std::vector<std::byte>>& blocks, int lost,
                                    std::uint64_t lost_size) {
  const auto n = static_cast<int>(parts.size());
  std::vector<std::vector<std::byte>> others;
  for (int member = 0; member < n; ++member) {
    if (member != lost) {
      others.push_back(parts[member]);
    }
  }
  const auto layout = ParityLayout::of(n, largest(others, lost_size));
  std::vector<std::byte> part(layout.padded_part());
  std::vector<std::byte> segment(layout.segment);
  for (int k = 0; k < n - 1; ++k) {
    const int holder = layout.holder_of(lost, k);
    const auto into = std::span(part).subspan(k * layout.segment, layout.segment);
    xor_into(into, blocks[holder]);
    for (int member = 0; member < n; ++member) {
      if (member != lost && member != holder) {
        padded_bytes(parts[member], layout.segment_for(member, holder) * layout.segment, segment);
        xor_into(into, segment);
      }
    }
  }
  part.resize(lost_size);
  return part;
}

}  // namespace epochrun
