// The arithmetic of XOR parity over a set of node-local parts (--local-redundancy xor), as
// RAID 5 and SCR's XOR scheme distribute it: in a set of n members, each member's part, padded
// with zeros to n - 1 segments, gives one segment to each other member's parity block; member
// p's block is the XOR of the segments the others give it. One lost member's part is the XOR,
// segment by segment, of the block that covered it and the other members' segments of that
// block; each member stores 1/(n - 1) of a part more. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace epochrun {

struct ParityLayout {
  int members = 0;            // n >= 2
  std::uint64_t segment = 0;  // bytes of a segment, and of each parity block

  // The layout of a set of `members` whose largest part holds `largest_part` bytes.
  static ParityLayout of(int members, std::uint64_t largest_part);

  // Which of member `member`'s segments member `holder`'s block covers (holder != member).
  int segment_for(int member, int holder) const {
    return ((holder - member - 1) % members + members) % members;
  }
  // Which member's block covers member `member`'s segment number `index`.
  int holder_of(int member, int index) const { return (member + 1 + index) % members; }
  // A part's bytes once padded: n - 1 segments.
  std::uint64_t padded_part() const { return segment * static_cast<std::uint64_t>(members - 1); }
};

// target ^= source, byte by byte (as many bytes as both have; the same size expected).
void xor_into(std::span<std::byte> target, std::span<const std::byte> source);

// `part`'s bytes [offset, offset + out.size()) into `out`, zeros past its end.
void padded_bytes(std::span<const std::byte> part, std::uint64_t offset, std::span<std::byte> out);

// In memory, for the tests and the benchmark: each member's parity block, and a lost member's
// part rebuilt (`parts[lost]` and `blocks[lost]` are not read; `lost_size` is its size).
std::vector<std::vector<std::byte>> parity_blocks(const std::vector<std::vector<std::byte>>& parts);
std::vector<std::byte> rebuilt_part(const std::vector<std::vector<std::byte>>& parts,
                                    const std::vector<std::vector<std::byte>>& blocks, int lost,
                                    std::uint64_t lost_size);

}  // namespace epochrun
