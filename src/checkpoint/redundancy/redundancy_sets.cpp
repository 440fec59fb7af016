#include "redundancy_sets.hpp"

#include <algorithm>

namespace epochrun {

HostPlacement HostPlacement::of(const std::vector<std::string>& host_of_each_rank) {
  HostPlacement placement;
  for (std::size_t rank = 0; rank < host_of_each_rank.size(); ++rank) {
    const auto& name = host_of_each_rank[rank];
    const auto found = std::find(placement.hosts.begin(), placement.hosts.end(), name);
    const auto host = static_cast<int>(found - placement.hosts.begin());
    if (found == placement.hosts.end()) {
      placement.hosts.push_back(name);
      placement.ranks_of_host.emplace_back();
    }
    placement.host_of_rank.push_back(host);
    placement.local_index.push_back(static_cast<int>(placement.ranks_of_host[host].size()));
    placement.ranks_of_host[host].push_back(static_cast<int>(rank));
  }
  return placement;
}

std::optional<int> partner_rank(const HostPlacement& placement, int rank) {
  const auto hosts = placement.hosts.size();
  if (hosts < 2) {
    return std::nullopt;
  }
  const auto& next = placement.ranks_of_host[(placement.host_of_rank[rank] + 1) % hosts];
  return next[placement.local_index[rank] % next.size()];
}

std::vector<XorSet> xor_sets(const HostPlacement& placement, int set_size) {
  const auto hosts = static_cast<int>(placement.hosts.size());
  const int groups = std::min((hosts + set_size - 1) / set_size, hosts / 2);
  std::vector<XorSet> sets;
  for (int group = 0; group < groups; ++group) {
    const int first = group * hosts / groups, end = (group + 1) * hosts / groups;
    for (std::size_t place = 0;; ++place) {
      XorSet set;
      bool any = false;
      for (int host = first; host < end; ++host) {
        const auto& ranks = placement.ranks_of_host[host];
        if (place < ranks.size()) {
          set.push_back(ranks[place]);
          any = true;
        }
      }
      if (!any) {
        break;
      }
      if (set.size() >= 2) {
        sets.push_back(std::move(set));
      }
    }
  }
  return sets;
}

std::vector<int> unprotected_ranks(const HostPlacement& placement, bool partner, int set_size) {
  std::vector<bool> covered(placement.ranks(), false);
  if (partner) {
    for (int rank = 0; rank < placement.ranks(); ++rank) {
      covered[rank] = partner_rank(placement, rank).has_value();
    }
  } else {
    for (const auto& set : xor_sets(placement, set_size)) {
      for (const int rank : set) {
        covered[rank] = true;
      }
    }
  }
  std::vector<int> alone;
  for (int rank = 0; rank < placement.ranks(); ++rank) {
    if (!covered[rank]) {
      alone.push_back(rank);
    }
  }
  return alone;
}

}  // namespace epochrun
