// Point-to-point transfers of byte buffers between ranks, bounded in time: every send and
// receive of one round posted at once, then waited for without holding a core (polite_wait.hpp),
// so that a peer that died or hangs ends the job within the bound instead of hanging it, as the
// bounded agreements do (agreement.hpp). Callable from any thread when MPI runs at
// MPI_THREAD_MULTIPLE, on a communicator only that thread uses. Internal to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"

namespace epochrun {

struct BufferSend {
  int peer = 0;
  int tag = 0;
  std::span<const std::byte> bytes;
};

struct BufferReceive {
  int peer = 0;
  int tag = 0;
  std::span<std::byte> bytes;  // the peer sends exactly this many bytes
};

// Collective among the ranks named: sends and receives every buffer (each at most 2 GiB; the
// messages between two ranks in one direction need distinct tags, or the same order on both
// sides). Throws MpiError when a receive gets another size. When a transfer has not completed
// `timeout` after the last one that did, logs one critical line naming `context` and the peers
// that did not answer, and ends the job (MPI_Abort, ExitCode::kJobFailed): its buffers are
// still MPI's.
void exchange_within(const Communicator& comm, std::span<const BufferSend> sends,
                     std::span<const BufferReceive> receives, std::chrono::duration<double> timeout,
                     const std::string& context);

// Collective: a bounded agreement on this rank's `failure` (null: none; raise_if_any_failed_within,
// collective_errors.hpp), then every rank's `value` in rank order on every rank.
std::vector<std::string> allgather_within(const Communicator& comm, const std::string& value,
                                          std::exception_ptr failure,
                                          std::chrono::duration<double> timeout,
                                          const std::string& context);

}  // namespace epochrun
