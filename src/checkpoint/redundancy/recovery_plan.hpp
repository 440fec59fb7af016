// Where each rank's node-local part of an epoch comes from when a restart finds some missing
// (recover_local_copies, local_recovery.hpp): from what every host holds now (the inventory:
// copies, partner copies, parity blocks, each verified by the rank that listed it), the sources
// and the byte ranges to move, or that a part cannot be recovered. A pure function of the
// inventory, so that every rank, given the same allgather, makes the same plan. Internal to the
// library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "local_redundancy_file.hpp"
#include "redundancy_sets.hpp"

namespace epochrun {

enum class HeldKind { kCopy, kPartner, kParity };

// One file of the epoch in some host's node-local directory, as the rank that listed it found it.
struct HeldFile {
  int lister = 0;    // a rank on the host that holds it: the one that sends its bytes
  std::string host;  // that host
  std::string name;  // the file's name in the node-local directory
  HeldKind kind = HeldKind::kCopy;
  int rank = 0;             // a copy's or partner copy's part; a parity block's holder
  bool intact = false;      // every byte verified (a copy against its record, others their header)
  std::uint64_t size = 0;   // a copy: the whole file
  std::uint64_t xxh64 = 0;  // a copy: of its record (local_copy_record_xxh64)
  std::string saved_on;     // a copy: the host its record names
  std::uint64_t data_offset = 0;  // partner copy, parity block: where the data starts
  RedundancyHeader header;        // partner copy, parity block
};

// Where a part comes from.
enum class PartSource {
  kInPlace,  // its host's copy, intact
  kMoved,    // the intact copy on another host (the rank runs elsewhere now)
  kPartner,  // the partner copy on another host
  kParity,   // rebuilt from its XOR set's other parts and parity blocks
  kLost,
};

// Bytes of a source file sent to a part's rank: [offset, offset + length) of `file` on
// `from`'s host, into the part at `at`, XORed in or written (a part padded with zeros gives no
// piece for its padding: XOR with zeros changes nothing).
struct Piece {
  int from = 0;
  std::string file;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  int to = 0;
  std::uint64_t at = 0;
  bool xor_in = false;
};

struct PartPlan {
  int rank = 0;
  PartSource source = PartSource::kLost;
  std::string saved_on;                 // the host that saved it ("" when nothing says)
  std::vector<std::string> from_hosts;  // where its bytes come from
  std::uint64_t size = 0, xxh64 = 0;    // the copy file's, its record's, as the sources name them
  std::uint64_t padded = 0;             // the file's size while its pieces are XORed in
  std::vector<Piece> pieces;
};

struct RecoveryPlan {
  std::vector<PartPlan> parts;  // one per rank

  std::vector<int> lost() const;
  // One line per host that saved parts: "host2: 2 parts rebuilt from the partner copies on
  // host3", "host1: 2 parts node-local".
  std::vector<std::string> host_lines() const;
};

// The plan for the parts of ranks 0 .. placement.ranks() - 1, placed as `placement` says now.
RecoveryPlan plan_recovery(const HostPlacement& placement, const std::vector<HeldFile>& held);

}  // namespace epochrun
