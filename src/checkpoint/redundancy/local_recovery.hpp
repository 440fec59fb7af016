// A restart's recovery of the node-local copies of an epoch across hosts (--local-redundancy,
// local_redundancy.hpp): after it, every rank either has a verified copy of its part of the
// epoch in its own node-local directory, or every rank knows which parts cannot be recovered.
// The restart may place ranks on other hosts than the save (a replacement for a dead host), so
// it starts from an inventory of what every host holds, whoever wrote it. Internal to the
// library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "local_redundancy.hpp"
#include "recovery_plan.hpp"

namespace epochrun {

struct RecoveryReport {
  std::int64_t epoch = 0;
  std::vector<PartSource> sources;      // per rank: where its part came from, or kLost
  std::vector<int> unrecoverable;       // ranks, ascending
  std::vector<std::string> host_lines;  // one per host that saved parts (RecoveryPlan)
  std::vector<std::string> damaged;     // "host3: epoch-000017.rank-2.partner: why", not used
  std::uint64_t bytes_sent = 0, bytes_received = 0;  // this rank's
  double seconds = 0;

  bool complete() const { return unrecoverable.empty(); }
  // "epoch 17: host1: 2 parts node-local; host2: 2 parts from the partner copy on host3".
  std::string summary() const;
};

// Collective, bounded in time. Inventory (each rank verifies its share of its host's files of
// `epoch` in `dir`: copies against their records, partner copies and parity blocks against their
// headers; one allgather), plan (recovery_plan.hpp), transfer (piece_transfer.hpp), and each
// rebuilt or moved copy verified (every value against its record, the record's xxh64 against the
// one its sources name) before it is renamed into place as local_copy_file(dir, epoch, rank). The
// report is the same on every rank. Throws only when the job cannot go on (a transfer that timed
// out ends the job).
RecoveryReport recover_local_copies(const std::filesystem::path& dir, std::int64_t epoch,
                                    const Communicator& comm, const RedundancyCall& call = {});

}  // namespace epochrun
