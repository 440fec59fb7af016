// Redundancy of the node-local copies across hosts (--local-redundancy; SCR's PARTNER and XOR
// schemes): after every rank has written its copy of an epoch (local_copy.hpp),
// protect_local_copies stores each rank's copy also on a rank of another host (partner), or
// each XOR set's parity blocks on its members (xor, xor_parity.hpp), so that the loss of one
// host (of each XOR set) loses no part: recover_local_copies (local_recovery.hpp) rebuilds
// them. The files: local_redundancy_file.hpp and docs/FORMAT.md. Internal to the library.
//
// Collective and bounded in time: every step ends in a bounded agreement, and every transfer
// in chunks of kProtectionChunk waits at most `timeout` for its peer (bounded_exchange.hpp).
// It makes MPI calls on `comm` only: from a background thread (an asynchronous save's flush),
// pass a communicator that only that thread uses, and only when MPI runs at
// MPI_THREAD_MULTIPLE (mpi_thread_level.hpp), as checkpoint_saver does for its seal.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/communicator.hpp"
#include "local_redundancy_options.hpp"

namespace epochrun {

// How a redundancy step runs.
struct RedundancyCall {
  std::chrono::duration<double> timeout = kDefaultSaveTimeout;
  // This rank's host as the others see it: host_name(), or another name for a test that runs
  // "hosts" as directories of one machine.
  std::string host;
};

struct RedundancyStats {
  std::uint64_t bytes_sent = 0, bytes_received = 0;  // this rank's
  double seconds = 0;
  std::vector<int> unprotected;  // ranks whose host's loss would lose their part (same on all)
};

// Collective. Every rank's copy DIR/epoch-NNNNNN.rank-R.local (written and agreed before) is
// protected as `redundancy` says; nothing happens for none. Throws on every rank when any rank
// fails (its copy missing, its node-local file system full: the epoch is then unprotected).
RedundancyStats protect_local_copies(const std::filesystem::path& dir, std::int64_t epoch,
                                     const Communicator& comm, const LocalRedundancy& redundancy,
                                     const RedundancyCall& call = {});

// The line a run logs at its start about what `redundancy` protects on these hosts: empty when
// every part is protected, otherwise a warning (one host: nothing is protected against its
// loss; or the ranks left out of every XOR set). Collective (an allgather of host names).
std::string redundancy_warning(const Communicator& comm, const LocalRedundancy& redundancy,
                               const RedundancyCall& call = {});

}  // namespace epochrun
