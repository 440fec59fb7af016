// The pieces of --local-redundancy that need no MPI peers: the option, who protects whom, the
// XOR parity arithmetic on parts of different sizes, the redundancy files' headers and their
// damage detection, and the recovery plan from an inventory (one host lost, two of one set, a
// damaged partner copy).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>

#include "epochrun/errors.hpp"
#include "local_redundancy_file.hpp"
#include "local_redundancy_options.hpp"
#include "recovery_plan.hpp"
#include "redundancy_sets.hpp"
#include "regular_file.hpp"
#include "test_support.hpp"
#include "xor_parity.hpp"

namespace epochrun::testing {
namespace {

std::vector<std::byte> random_bytes(std::size_t size, std::mt19937_64& random) {
  std::vector<std::byte> bytes(size);
  for (auto& byte : bytes) {
    byte = static_cast<std::byte>(random() & 0xff);
  }
  return bytes;
}

TEST(LocalRedundancyOptions, ParsesEachSchemeAndRefusesOthersInOneLine) {
  EXPECT_TRUE(parse_local_redundancy("none").none());
  EXPECT_EQ(parse_local_redundancy("partner").scheme, LocalRedundancy::Scheme::kPartner);
  EXPECT_EQ(parse_local_redundancy("xor").set_size, 4);
  EXPECT_EQ(parse_local_redundancy("xor:3").set_size, 3);
  EXPECT_EQ(local_redundancy_name(parse_local_redundancy("xor:7")), "xor:7");
  for (const auto* bad : {"", "xor:", "xor:1", "xor:65", "xor:3x", "xor:-2", "raid5", "Partner"}) {
    try {
      parse_local_redundancy(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& error) {
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(error.what()).find("--local-redundancy"), std::string::npos);
    }
  }
}

TEST(RedundancySets, PartnersAreOnAnotherHostAndSetsSpanHosts) {
  // Two ranks on each of four hosts, placed round robin.
  std::vector<std::string> hosts;
  for (int rank = 0; rank < 8; ++rank) {
    hosts.push_back("host" + std::to_string(rank % 4 + 1));
  }
  const auto placement = HostPlacement::of(hosts);
  ASSERT_EQ(placement.hosts.size(), 4u);
  for (int rank = 0; rank < 8; ++rank) {
    const auto partner = partner_rank(placement, rank);
    ASSERT_TRUE(partner);
    EXPECT_NE(placement.host(*partner), placement.host(rank));
  }
  const auto sets = xor_sets(placement, 4);
  ASSERT_EQ(sets.size(), 2u);
  for (const auto& set : sets) {
    EXPECT_EQ(set.size(), 4u);
    std::set<std::string> distinct;
    for (const int rank : set) {
      distinct.insert(placement.host(rank));
    }
    EXPECT_EQ(distinct.size(), set.size());
  }
  EXPECT_TRUE(unprotected_ranks(placement, false, 4).empty());
  // Five hosts in sets of four: two sets, of two and three hosts; three hosts in sets of two:
  // one set of three (a set of one host protects nothing).
  EXPECT_EQ(xor_sets(HostPlacement::of({"a", "b", "c", "d", "e"}), 4).size(), 2u);
  EXPECT_EQ(xor_sets(HostPlacement::of({"a", "b", "c"}), 2), (std::vector<XorSet>{{0, 1, 2}}));
  // One host: nothing is protected. A host with an extra rank: that rank is in no set.
  const auto alone = HostPlacement::of({"a", "a"});
  EXPECT_FALSE(partner_rank(alone, 0));
  EXPECT_EQ(unprotected_ranks(alone, true, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(unprotected_ranks(HostPlacement::of({"a", "b", "a"}), false, 4), (std::vector<int>{2}));
}

TEST(XorParity, AnyOneLostPartOfDifferentSizesIsRebuiltBitIdentical) {
  std::mt19937_64 random(31);
  for (int members = 2; members <= 5; ++members) {
    std::vector<std::vector<std::byte>> parts;
    for (int member = 0; member < members; ++member) {
      parts.push_back(random_bytes(1000 + 337 * static_cast<std::size_t>(member * member), random));
    }
    const auto blocks = parity_blocks(parts);
    const auto layout = ParityLayout::of(members, parts.back().size());
    for (const auto& block : blocks) {
      EXPECT_EQ(block.size(), layout.segment);  // 1/(n - 1) of the largest part
    }
    for (int lost = 0; lost < members; ++lost) {
      auto without = parts;
      const auto size = without[lost].size();
      without[lost].clear();
      EXPECT_EQ(rebuilt_part(without, blocks, lost, size), parts[lost])
          << members << " members, member " << lost << " lost";
    }
    // A damaged parity byte rebuilds another part: the xxh64 check is what catches it.
    auto damaged = blocks;
    damaged[1][0] ^= std::byte{1};
    EXPECT_NE(rebuilt_part(parts, damaged, 0, parts[0].size()), parts[0]);
  }
}

RedundancyHeader parity_header() {
  return {RedundancyKind::kParity,
          17,
          5,
          1,
          4096,
          4096,
          0,
          {{2, "host1", 9000, 0x1234}, {5, "host2", 8000, 0x5678}, {8, "host3", 100, 0x9abc}}};
}

TEST(RedundancyFile, HeaderRoundTripsAndAnyDamagedByteIsFound) {
  ScratchDir dir;
  const auto file = parity_block_file(dir.path(), 17, 5);
  EXPECT_EQ(file.filename(), "epoch-000017.rank-5.xor");
  EXPECT_EQ(partner_copy_file(dir.path(), 17, 5).filename(), "epoch-000017.rank-5.partner");
  std::mt19937_64 random(5);
  const auto data = random_bytes(4096, random);
  {
    RedundancyFileWriter writer(file, parity_header());
    writer.append(std::span(data).first(1000));
    writer.append(std::span(data).subspan(1000));
    writer.finish();
  }
  const auto [header, offset] = verified_redundancy_file(file);
  auto expected = parity_header();
  expected.data_xxh64 = header.data_xxh64;
  EXPECT_EQ(header, expected);
  EXPECT_EQ(offset + data.size(), std::filesystem::file_size(file));
  const auto parsed = parse_redundancy_file_name(file.filename().string());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->kind, RedundancyKind::kParity);
  EXPECT_EQ(parsed->rank, 5);
  // Every byte of the header and a sample of the data, flipped in turn: never accepted.
  const auto pristine = [&] {
    std::ifstream in(file, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }();
  for (std::size_t at = 0; at < pristine.size(); at += at < offset ? 1 : 509) {
    auto bytes = pristine;
    bytes[at] ^= 0x40;
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    EXPECT_THROW(verified_redundancy_file(file), CorruptCheckpoint) << "byte " << at;
  }
  // Epochs no longer kept lose their redundancy files, kept ones keep them.
  std::ofstream(partner_copy_file(dir.path(), 18, 1)) << "x";
  EXPECT_EQ(remove_redundancy_files(dir.path(), [](std::int64_t epoch) { return epoch == 18; }), 1);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_TRUE(std::filesystem::exists(partner_copy_file(dir.path(), 18, 1)));
}

// The inventory of four hosts of one rank each after an XOR save of one set, with `lost` hosts'
// files gone.
std::vector<HeldFile> xor_inventory(const std::set<std::string>& lost) {
  std::vector<RedundancyMember> members;
  for (int rank = 0; rank < 4; ++rank) {
    members.push_back({rank, "host" + std::to_string(rank + 1), 5000u + rank, 100u + rank});
  }
  std::vector<HeldFile> held;
  for (const auto& member : members) {
    if (lost.count(member.host) != 0) {
      continue;
    }
    held.push_back({member.rank,
                    member.host,
                    "epoch-000017.rank-" + std::to_string(member.rank) + ".local",
                    HeldKind::kCopy,
                    member.rank,
                    true,
                    member.size,
                    member.xxh64,
                    member.host,
                    0,
                    {}});
    held.push_back(
        {member.rank,
         member.host,
         "epoch-000017.rank-" + std::to_string(member.rank) + ".xor",
         HeldKind::kParity,
         member.rank,
         true,
         0,
         0,
         "",
         200,
         {RedundancyKind::kParity, 17, member.rank, member.rank, 1668, 1668, 7, members}});
  }
  return held;
}

TEST(RecoveryPlan, OneLostHostOfASetIsRebuiltTwoAreNot) {
  // The restart runs rank 1 on a fresh host5.
  const auto placement = HostPlacement::of({"host1", "host5", "host3", "host4"});
  const auto plan = plan_recovery(placement, xor_inventory({"host2"}));
  EXPECT_TRUE(plan.lost().empty());
  EXPECT_EQ(plan.parts[0].source, PartSource::kInPlace);
  const auto& rebuilt = plan.parts[1];
  EXPECT_EQ(rebuilt.source, PartSource::kParity);
  EXPECT_EQ(rebuilt.size, 5001u);
  EXPECT_EQ(rebuilt.xxh64, 101u);
  // Three segments, each its block and the two other members' segments: nine pieces at most.
  EXPECT_LE(rebuilt.pieces.size(), 9u);
  for (const auto& piece : rebuilt.pieces) {
    EXPECT_EQ(piece.to, 1);
    EXPECT_NE(piece.from, 1);
    EXPECT_TRUE(piece.xor_in);
  }
  EXPECT_EQ(plan.host_lines()[1], "host2: 1 part rebuilt from XOR parity on host1, host3, host4");

  const auto twice = plan_recovery(placement, xor_inventory({"host2", "host3"}));
  EXPECT_EQ(twice.lost(), (std::vector<int>{1, 2}));
  EXPECT_EQ(twice.host_lines()[2], "host3: 1 part lost");
}

TEST(RecoveryPlan, ADamagedPartnerCopyIsNeverUsed) {
  const auto placement = HostPlacement::of({"host1", "host3"});
  const RedundancyMember member{1, "host2", 4000, 42};
  HeldFile partner{0,
                   "host1",
                   "epoch-000017.rank-1.partner",
                   HeldKind::kPartner,
                   1,
                   true,
                   0,
                   0,
                   "",
                   128,
                   {RedundancyKind::kPartner, 17, 1, 0, 0, 4000, 9, {member}}};
  HeldFile copy{0, "host1", "epoch-000017.rank-0.local", HeldKind::kCopy, 0, true, 3000, 7, "host1",
                0, {}};
  auto plan = plan_recovery(placement, {copy, partner});
  EXPECT_EQ(plan.parts[1].source, PartSource::kPartner);
  ASSERT_EQ(plan.parts[1].pieces.size(), 1u);
  EXPECT_EQ(plan.parts[1].pieces[0].offset, 128u);
  EXPECT_EQ(plan.host_lines(),
            (std::vector<std::string>{"host1: 1 part node-local",
                                      "host2: 1 part from the partner copy on host1"}));
  partner.intact = false;
  plan = plan_recovery(placement, {copy, partner});
  EXPECT_EQ(plan.lost(), std::vector<int>{1});
}

}  // namespace
}  // namespace epochrun::testing
