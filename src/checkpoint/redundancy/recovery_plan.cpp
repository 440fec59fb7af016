#include "recovery_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "xor_parity.hpp"

namespace epochrun {
namespace {

const HeldFile* find_held(const std::vector<HeldFile>& held,
                          const std::function<bool(const HeldFile&)>& wanted) {
  const auto found = std::find_if(held.begin(), held.end(), wanted);
  return found == held.end() ? nullptr : &*found;
}

// The host that saved `rank`'s part, as any file of the epoch says (intact or not).
std::string saved_on(const std::vector<HeldFile>& held, int rank) {
  for (const auto& file : held) {
    if (file.kind == HeldKind::kCopy && file.rank == rank && !file.saved_on.empty()) {
      return file.saved_on;
    }
    for (const auto& member : file.header.members) {
      if (file.kind != HeldKind::kCopy && member.rank == rank) {
        return member.host;
      }
    }
  }
  return "";
}

void add_host(std::vector<std::string>& hosts, const std::string& host) {
  if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) {
    hosts.push_back(host);
  }
}

// `rank`'s part as the XOR of the parity block that covered each of its segments and the other
// members' segments of that block, when the set recorded in `parity` has all of them intact.
std::optional<PartPlan> rebuilt_from(const std::vector<HeldFile>& held, const HeldFile& parity,
                                     int rank) {
  const auto& members = parity.header.members;
  const auto lost = static_cast<int>(
      std::find_if(members.begin(), members.end(),
                   [&](const RedundancyMember& member) { return member.rank == rank; }) -
      members.begin());
  const ParityLayout layout{static_cast<int>(members.size()), parity.header.segment};
  PartPlan part{rank,
                PartSource::kParity,
                members[lost].host,
                {},
                members[lost].size,
                members[lost].xxh64,
                layout.padded_part(),
                {}};
  for (int k = 0; k < layout.members - 1; ++k) {
    const int holder = layout.holder_of(lost, k);
    const auto at = static_cast<std::uint64_t>(k) * layout.segment;
    const auto* block = find_held(held, [&](const HeldFile& file) {
      return file.kind == HeldKind::kParity && file.intact && file.rank == members[holder].rank &&
             file.header.members == members && file.header.segment == layout.segment;
    });
    if (block == nullptr) {
      return std::nullopt;
    }
    part.pieces.push_back(
        Piece{block->lister, block->name, block->data_offset, layout.segment, rank, at, true});
    add_host(part.from_hosts, block->host);
    for (int member = 0; member < layout.members; ++member) {
      if (member == lost || member == holder) {
        continue;
      }
      const auto& wanted = members[member];
      const auto* copy = find_held(held, [&](const HeldFile& file) {
        return file.kind == HeldKind::kCopy && file.intact && file.rank == wanted.rank &&
               file.size == wanted.size && file.xxh64 == wanted.xxh64;
      });
      if (copy == nullptr) {
        return std::nullopt;
      }
      const auto offset = layout.segment_for(member, holder) * layout.segment;
      if (offset < wanted.size) {
        part.pieces.push_back(Piece{copy->lister, copy->name, offset,
                                    std::min(layout.segment, wanted.size - offset), rank, at,
                                    true});
        add_host(part.from_hosts, copy->host);
      }
    }
  }
  std::sort(part.from_hosts.begin(), part.from_hosts.end());
  return part;
}

PartPlan part_plan(const HostPlacement& placement, const std::vector<HeldFile>& held, int rank) {
  const auto& here = placement.host(rank);
  const auto copy_of = [&](bool on_this_host) {
    return find_held(held, [&](const HeldFile& file) {
      return file.kind == HeldKind::kCopy && file.intact && file.rank == rank &&
             (file.host == here) == on_this_host;
    });
  };
  if (const auto* copy = copy_of(true)) {
    return {rank, PartSource::kInPlace, copy->saved_on, {here}, copy->size, copy->xxh64, 0, {}};
  }
  if (const auto* copy = copy_of(false)) {
    return {rank,           PartSource::kMoved,
            copy->saved_on, {copy->host},
            copy->size,     copy->xxh64,
            copy->size,     {Piece{copy->lister, copy->name, 0, copy->size, rank, 0, false}}};
  }
  if (const auto* partner = find_held(held, [&](const HeldFile& file) {
        return file.kind == HeldKind::kPartner && file.intact && file.rank == rank;
      })) {
    const auto& member = partner->header.members.front();
    return {
        rank,
        PartSource::kPartner,
        member.host,
        {partner->host},
        member.size,
        member.xxh64,
        member.size,
        {Piece{partner->lister, partner->name, partner->data_offset, member.size, rank, 0, false}}};
  }
  for (const auto& file : held) {
    const auto& members = file.header.members;
    if (file.kind == HeldKind::kParity && file.intact &&
        std::any_of(members.begin(), members.end(),
                    [&](const RedundancyMember& member) { return member.rank == rank; })) {
      if (auto rebuilt = rebuilt_from(held, file, rank)) {
        return std::move(*rebuilt);
      }
    }
  }
  return {rank, PartSource::kLost, saved_on(held, rank), {}, 0, 0, 0, {}};
}

std::string how(PartSource source, const std::vector<std::string>& hosts) {
  switch (source) {
    case PartSource::kInPlace:
      return "node-local";
    case PartSource::kMoved:
      return fmt::format("from the node-local copy on {}", fmt::join(hosts, ", "));
    case PartSource::kPartner:
      return fmt::format("from the partner copy on {}", fmt::join(hosts, ", "));
    case PartSource::kParity:
      return fmt::format("rebuilt from XOR parity on {}", fmt::join(hosts, ", "));
    case PartSource::kLost:
      break;
  }
  return "lost";
}

}  // namespace

RecoveryPlan plan_recovery(const HostPlacement& placement, const std::vector<HeldFile>& held) {
  RecoveryPlan plan;
  for (int rank = 0; rank < placement.ranks(); ++rank) {
    plan.parts.push_back(part_plan(placement, held, rank));
  }
  return plan;
}

std::vector<int> RecoveryPlan::lost() const {
  std::vector<int> ranks;
  for (const auto& part : parts) {
    if (part.source == PartSource::kLost) {
      ranks.push_back(part.rank);
    }
  }
  return ranks;
}

std::vector<std::string> RecoveryPlan::host_lines() const {
  // Per host that saved parts, in the order of its lowest rank: how many came which way.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<std::pair<std::string, int>>> ways;
  for (const auto& part : parts) {
    const auto host = part.saved_on.empty() ? std::string("an unknown host") : part.saved_on;
    add_host(hosts, host);
    auto& counted = ways[host];
    const auto way =
        how(part.source,
            part.source == PartSource::kInPlace ? std::vector<std::string>{} : part.from_hosts);
    const auto found = std::find_if(counted.begin(), counted.end(),
                                    [&](const auto& entry) { return entry.first == way; });
    if (found == counted.end()) {
      counted.emplace_back(way, 1);
    } else {
      ++found->second;
    }
  }
  std::vector<std::string> lines;
  for (const auto& host : hosts) {
    std::vector<std::string> said;
    for (const auto& [way, count] : ways[host]) {
      said.push_back(fmt::format("{} part{} {}", count, count == 1 ? "" : "s", way));
    }
    lines.push_back(fmt::format("{}: {}", host, fmt::join(said, ", ")));
  }
  return lines;
}

}  // namespace epochrun
