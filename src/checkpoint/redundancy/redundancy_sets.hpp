// Who protects whose node-local part (--local-redundancy, local_redundancy.hpp): the hosts the
// ranks run on, each rank's partner on another host, and the XOR sets of ranks on different
// hosts. Pure functions of the ranks' host names, so that every rank, given the same allgather,
// makes the same choice. Internal to the library.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace epochrun {

// The ranks of a job by host: the hosts in the order of their lowest rank.
struct HostPlacement {
  std::vector<std::string> hosts;               // distinct
  std::vector<int> host_of_rank;                // index into hosts, per rank
  std::vector<std::vector<int>> ranks_of_host;  // ascending, per host
  std::vector<int> local_index;                 // a rank's place among its host's ranks

  // From each rank's host name (an allgather of host_name()).
  static HostPlacement of(const std::vector<std::string>& host_of_each_rank);
  int ranks() const { return static_cast<int>(host_of_rank.size()); }
  const std::string& host(int rank) const { return hosts[host_of_rank[rank]]; }
  // The lowest rank on `rank`'s host.
  int host_leader(int rank) const { return ranks_of_host[host_of_rank[rank]].front(); }
};

// The rank that stores `rank`'s partner copy: on the next host in order (the last host's
// partner is the first), the rank at `rank`'s place on its own host, modulo that host's rank
// count. Never on `rank`'s host; nullopt when the job runs on one host.
std::optional<int> partner_rank(const HostPlacement& placement, int rank);

// One XOR set: ranks on different hosts, in their hosts' order, each storing one parity block
// of the others (xor_parity.hpp).
using XorSet = std::vector<int>;

// The hosts in ceil(H / set_size) consecutive groups (fewer when a group would hold one host),
// their sizes differing by one at most; in each group, the ranks at place j of every host that
// has one form a set. Every rank is in one set at most: a rank alone at its place (its host
// runs more ranks than the others of its group), or every rank of a one-host job, is in none.
std::vector<XorSet> xor_sets(const HostPlacement& placement, int set_size);

// The ranks in no set or without a partner: what a host's loss would lose.
std::vector<int> unprotected_ranks(const HostPlacement& placement, bool partner, int set_size);

}  // namespace epochrun
