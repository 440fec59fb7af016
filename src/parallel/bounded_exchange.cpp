#include "bounded_exchange.hpp"

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "collective_errors.hpp"
#include "mpi_check.hpp"
#include "polite_wait.hpp"

namespace epochrun {
namespace {

// Ends the job: a peer did not send or receive in time, and its transfers are still MPI's.
[[noreturn]] void give_up(const Communicator& comm, const std::string& context,
                          const std::set<int>& peers, std::chrono::duration<double> timeout) {
  spdlog::critical(
      "{}: rank{} {} did not complete a transfer with this rank within {:.0f} s; aborting the "
      "job rather than letting it hang",
      context, peers.size() == 1 ? "" : "s", fmt::join(peers, ", "), timeout.count());
  spdlog::default_logger()->flush();
  comm.abort(ExitCode::kJobFailed);
}

// A transfer moves as MPI calls make progress: Open MPI passes a large message on in fragments,
// each at a test of a rank that waits for it (shared memory without single-copy, TCP). The
// polite wait's pauses between tests (polite_wait.hpp), made for a peer that is late, would make
// each fragment wait for this rank to wake (milliseconds on a loaded machine): while a transfer
// makes progress it is tested as a blocking MPI call would (Open MPI's own yield when ranks
// outnumber cores still frees the core), and only once it has made none for a second (a stuck
// peer) with polite_pause's pauses.
std::chrono::nanoseconds transfer_pause(std::chrono::steady_clock::duration waited) {
  return waited < std::chrono::seconds(1) ? std::chrono::nanoseconds(0) : polite_pause(waited);
}

}  // namespace

void exchange_within(const Communicator& comm, std::span<const BufferSend> sends,
                     std::span<const BufferReceive> receives, std::chrono::duration<double> timeout,
                     const std::string& context) {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  requests.reserve(sends.size() + receives.size());
  for (const auto& send : sends) {
    auto& request = requests.emplace_back(MPI_REQUEST_NULL);
    peers.push_back(send.peer);
    check_mpi(MPI_Isend(send.bytes.data(), to_count(send.bytes.size(), "a send"), MPI_BYTE,
                        send.peer, send.tag, comm.raw(), &request),
              "MPI_Isend");
  }
  for (const auto& receive : receives) {
    auto& request = requests.emplace_back(MPI_REQUEST_NULL);
    peers.push_back(receive.peer);
    check_mpi(MPI_Irecv(receive.bytes.data(), to_count(receive.bytes.size(), "a receive"), MPI_BYTE,
                        receive.peer, receive.tag, comm.raw(), &request),
              "MPI_Irecv");
  }
  const auto bound = std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  auto last_progress = std::chrono::steady_clock::now();
  std::size_t pending = requests.size();
  std::vector<int> done(requests.size());
  std::vector<MPI_Status> statuses(requests.size());
  while (pending > 0) {
    int count = 0;
    check_mpi(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(),
                           statuses.data()),
              "MPI_Testsome");
    const auto now = std::chrono::steady_clock::now();
    if (count != MPI_UNDEFINED && count > 0) {
      for (int i = 0; i < count; ++i) {
        const auto index = static_cast<std::size_t>(done[static_cast<std::size_t>(i)]);
        if (index >= sends.size()) {
          const auto& receive = receives[index - sends.size()];
          int received = 0;
          check_mpi(MPI_Get_count(&statuses[static_cast<std::size_t>(i)], MPI_BYTE, &received),
                    "MPI_Get_count");
          if (static_cast<std::size_t>(received) != receive.bytes.size()) {
            throw MpiError(context + ": rank " + std::to_string(receive.peer) + " sent " +
                           std::to_string(received) + " bytes, not " +
                           std::to_string(receive.bytes.size()));
          }
        }
      }
      pending -= static_cast<std::size_t>(count);
      last_progress = now;
      continue;
    }
    if (now - last_progress >= bound) {
      std::set<int> late;
      for (std::size_t i = 0; i < requests.size(); ++i) {
        if (requests[i] != MPI_REQUEST_NULL) {
          late.insert(peers[i]);
        }
      }
      give_up(comm, context, late, timeout);
    }
    const auto pause = transfer_pause(now - last_progress);
    if (pause.count() > 0) {
      std::this_thread::sleep_for(pause);
    }
  }
}

std::vector<std::string> allgather_within(const Communicator& comm, const std::string& value,
                                          std::exception_ptr failure,
                                          std::chrono::duration<double> timeout,
                                          const std::string& context) {
  raise_if_any_failed_within(comm, failure, context, timeout);
  return comm.allgather(value);
}

}  // namespace epochrun
