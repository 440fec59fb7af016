#include "agreement.hpp"

#include <mpi.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "mpi_check.hpp"
#include "polite_wait.hpp"
#include "roll_call.hpp"

namespace epochrun {
namespace {

std::chrono::steady_clock::duration to_steady(std::chrono::duration<double> span) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(span);
}

// The buffers of a non-blocking reduction or broadcast, on the heap: when a wait gives up, the
// request stays pending (MPI cannot cancel a collective) and the caller ends the job, so they
// must outlive this call. `carried` holds the outcome first, then what the collective carries
// with it (first_error_within's `max_of`, root_error_within's `values`).
struct ReductionBuffers {
  int candidate = 0;
  int failing = 0;
  std::vector<std::int64_t> carried;
  MPI_Request request = MPI_REQUEST_NULL;
};

// No rank failed: the outcome first_error_within carries (the maximum of the negated failing
// ranks), and root_error_within's.
constexpr std::int64_t kNoneFailed = std::numeric_limits<std::int64_t>::min();

// How long a wait goes without looking for a roll call's messages. No rank gives up, and so
// none calls the roll, before its timeout (seconds), and the roll call's own windows are
// seconds long; but most agreements complete within microseconds, and there the probes of a
// roll call after every test (one or two MPI_Iprobe, each a pass of MPI's progress engine and,
// with ranks sharing cores, a yield) were most of what a waiting rank did between two tests:
// a test that would have seen the agreement complete came later (docs/scaling.md).
constexpr auto kRollCallAfter = std::chrono::milliseconds(10);

// Waits for `buffers`' request at most `timeout` (the other ranks one second more: rank 0 gives
// up first and calls the roll while they still wait and answer); when it does not complete,
// the roll call names the ranks that did not come (AgreementTimeout) and the buffers stay
// MPI's, leaked, since the caller ends the job.
void wait_within(const Communicator& comm, std::unique_ptr<ReductionBuffers>& buffers,
                 std::chrono::duration<double> timeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + to_steady(timeout) +
                        (comm.is_root() ? std::chrono::seconds(0) : std::chrono::seconds(1));
  RollCall roll_call(comm, std::to_string(static_cast<long long>(timeout.count())));
  if (!wait_politely(buffers->request, [&] {
        const auto now = std::chrono::steady_clock::now();
        return (now - started >= kRollCallAfter && roll_call.poll()) || now >= deadline;
      })) {
    buffers.release();  // still in MPI's hands
    roll_call.give_up();
  }
}

// Starts the reduction that finds the lowest failing rank.
std::unique_ptr<ReductionBuffers> start_lowest_failing(const Communicator& comm,
                                                       const std::optional<std::string>& error) {
  auto buffers = std::make_unique<ReductionBuffers>();
  buffers->candidate = error ? comm.rank() : std::numeric_limits<int>::max();
  check_mpi(MPI_Iallreduce(&buffers->candidate, &buffers->failing, 1, MPI_INT, MPI_MIN, comm.raw(),
                           &buffers->request),
            "MPI_Iallreduce");
  return buffers;
}

// The message of the lowest failing rank, as first_error returns it, once `failing` is known.
std::optional<std::string> share_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error, int failing) {
  if (failing == std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  std::string message = local_error && failing == comm.rank() ? *local_error : std::string();
  comm.broadcast(message, failing);
  // Rank 0 is where decisions are made; naming other ranks tells which node failed.
  if (failing == 0) {
    return message;
  }
  return "rank " + std::to_string(failing) + ": " + message;
}

}  // namespace

std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error) {
  const int candidate = local_error ? comm.rank() : std::numeric_limits<int>::max();
  return share_error(comm, local_error, comm.allreduce(candidate, Reduction::kMin));
}

std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error,
                                       std::chrono::duration<double> patience) {
  auto reduction = start_lowest_failing(comm, local_error);
  if (!local_error) {
    check_mpi(MPI_Wait(&reduction->request, MPI_STATUS_IGNORE), "MPI_Wait");
    return share_error(comm, local_error, reduction->failing);
  }
  const auto deadline = std::chrono::steady_clock::now() + to_steady(patience);
  if (!wait_politely(reduction->request,
                     [&] { return std::chrono::steady_clock::now() >= deadline; })) {
    reduction.release();  // still in MPI's hands; the caller is about to end the job
    throw AgreementTimeout(*local_error);
  }
  return share_error(comm, local_error, reduction->failing);
}

std::optional<std::string> first_error_within(const Communicator& comm,
                                              const std::optional<std::string>& local_error,
                                              std::chrono::duration<double> timeout) {
  return first_error_within(comm, local_error, timeout, {});
}

std::optional<std::string> first_error_within(const Communicator& comm,
                                              const std::optional<std::string>& local_error,
                                              std::chrono::duration<double> timeout,
                                              std::span<std::int64_t> max_of) {
  auto reduction = std::make_unique<ReductionBuffers>();
  // The lowest failing rank is the maximum of the failing ranks negated.
  reduction->carried.push_back(local_error ? -static_cast<std::int64_t>(comm.rank()) : kNoneFailed);
  reduction->carried.insert(reduction->carried.end(), max_of.begin(), max_of.end());
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, reduction->carried.data(),
                           static_cast<int>(reduction->carried.size()), MPI_INT64_T, MPI_MAX,
                           comm.raw(), &reduction->request),
            "MPI_Iallreduce");
  wait_within(comm, reduction, timeout);
  std::copy(reduction->carried.begin() + 1, reduction->carried.end(), max_of.begin());
  const auto failing = reduction->carried.front();
  return share_error(
      comm, local_error,
      failing == kNoneFailed ? std::numeric_limits<int>::max() : static_cast<int>(-failing));
}

std::optional<std::string> root_error_within(const Communicator& comm,
                                             const std::optional<std::string>& root_error,
                                             std::chrono::duration<double> timeout) {
  return root_error_within(comm, root_error, timeout, {});
}

std::optional<std::string> root_error_within(const Communicator& comm,
                                             const std::optional<std::string>& root_error,
                                             std::chrono::duration<double> timeout,
                                             std::span<std::int64_t> values) {
  auto outcome = std::make_unique<ReductionBuffers>();
  // 0: rank 0 failed; otherwise none did (only rank 0 worked).
  const bool failed = comm.is_root() && root_error;
  outcome->carried.push_back(failed ? 0 : kNoneFailed);
  outcome->carried.insert(outcome->carried.end(), values.begin(), values.end());
  check_mpi(MPI_Ibcast(outcome->carried.data(), static_cast<int>(outcome->carried.size()),
                       MPI_INT64_T, 0, comm.raw(), &outcome->request),
            "MPI_Ibcast");
  wait_within(comm, outcome, timeout);
  std::copy(outcome->carried.begin() + 1, outcome->carried.end(), values.begin());
  return share_error(comm, comm.is_root() ? root_error : std::nullopt,
                     outcome->carried.front() == 0 ? 0 : std::numeric_limits<int>::max());
}

}  // namespace epochrun
