#include "agreement.hpp"

#include <mpi.h>

#include <limits>
#include <thread>
#include <vector>

#include "epochrun/errors.hpp"
#include "mpi_check.hpp"

namespace epochrun {
namespace {

// The tag of first_error_within's messages. Messages between two ranks with one tag arrive in
// order, so consecutive agreements never mix.
constexpr int kAgreementTag = 7301;

using Deadline = std::chrono::steady_clock::time_point;

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

// first_error_within's message from `source`, or nullopt when none came before `deadline`.
std::optional<std::string> receive_within(const Communicator& comm, int source, Deadline deadline) {
  for (;;) {
    int arrived = 0;
    MPI_Status status{};
    check_mpi(MPI_Iprobe(source, kAgreementTag, comm.raw(), &arrived, &status), "MPI_Iprobe");
    if (arrived) {
      int length = 0;
      check_mpi(MPI_Get_count(&status, MPI_CHAR, &length), "MPI_Get_count");
      std::string message(static_cast<std::size_t>(length), '\0');
      check_mpi(MPI_Recv(message.data(), length, MPI_CHAR, source, kAgreementTag, comm.raw(),
                         MPI_STATUS_IGNORE),
                "MPI_Recv");
      if (message.empty()) {
        throw MpiError("empty agreement message from rank " + std::to_string(source));
      }
      return message;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    // Polling costs a step a fraction of a millisecond, against saves of milliseconds at least.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// first_error_within on a rank other than 0: sends `report` to rank 0 and returns its answer.
std::string report_to_root(const Communicator& comm, const std::string& report, Deadline deadline,
                           const std::string& seconds) {
  MPI_Request sent = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(report.data(), to_count(report.size(), "MPI_Isend"), MPI_CHAR, 0,
                      kAgreementTag, comm.raw(), &sent),
            "MPI_Isend");
  // A little longer than rank 0, which can name the ranks that did not come, so that it is the
  // one to speak when rank 0 itself is not the one stuck.
  auto answer = receive_within(comm, 0, deadline + std::chrono::seconds(1));
  if (!answer) {
    throw AgreementTimeout("rank 0 did not answer within " + seconds + " s");
  }
  // Rank 0 answers only after it received the report: the send is complete.
  check_mpi(MPI_Wait(&sent, MPI_STATUS_IGNORE), "MPI_Wait");
  return *answer;
}

// first_error_within's answer, from every rank's report (nullopt: it did not come); throws
// AgreementTimeout naming the ranks that did not come.
std::string answer_of(const std::vector<std::optional<std::string>>& reports,
                      const std::string& seconds) {
  std::string missing;
  int missing_count = 0;
  std::string answer = "0";
  for (int source = static_cast<int>(reports.size()) - 1; source >= 0; --source) {
    const auto& received = reports[static_cast<std::size_t>(source)];
    if (!received) {
      missing = std::to_string(source) + (missing.empty() ? "" : ", ") + missing;
      ++missing_count;
    } else if (received->front() == '1') {
      // The lowest failing rank wins; rank 0 is where decisions are made, so only other ranks
      // are named.
      answer =
          "1" + (source == 0 ? "" : "rank " + std::to_string(source) + ": ") + received->substr(1);
    }
  }
  if (missing_count > 0) {
    throw AgreementTimeout((missing_count == 1 ? "rank " : "ranks ") + missing +
                           " did not arrive within " + seconds + " s");
  }
  return answer;
}

// first_error_within on rank 0: collects every rank's report, answers every rank.
std::string answer_every_rank(const Communicator& comm, const std::string& report,
                              Deadline deadline, const std::string& seconds) {
  const int size = comm.size();
  std::vector<std::optional<std::string>> reports(static_cast<std::size_t>(size));
  reports[0] = report;
  for (int source = 1; source < size; ++source) {
    reports[static_cast<std::size_t>(source)] = receive_within(comm, source, deadline);
  }
  const std::string answer = answer_of(reports, seconds);
  std::vector<MPI_Request> answers(static_cast<std::size_t>(size - 1), MPI_REQUEST_NULL);
  for (int target = 1; target < size; ++target) {
    check_mpi(MPI_Isend(answer.data(), to_count(answer.size(), "MPI_Isend"), MPI_CHAR, target,
                        kAgreementTag, comm.raw(), &answers[static_cast<std::size_t>(target - 1)]),
              "MPI_Isend");
  }
  // Every rank reported and waits for its answer, so these complete; MPI_Waitall cannot hang.
  check_mpi(MPI_Waitall(static_cast<int>(answers.size()), answers.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  return answer;
}

}  // namespace

std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error) {
  int candidate = local_error ? comm.rank() : std::numeric_limits<int>::max();
  int failing = 0;
  check_mpi(MPI_Allreduce(&candidate, &failing, 1, MPI_INT, MPI_MIN, comm.raw()), "MPI_Allreduce");
  return share_error(comm, local_error, failing);
}

std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error,
                                       std::chrono::duration<double> patience) {
  int candidate = local_error ? comm.rank() : std::numeric_limits<int>::max();
  int failing = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(&candidate, &failing, 1, MPI_INT, MPI_MIN, comm.raw(), &request),
            "MPI_Iallreduce");
  if (!local_error) {
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    return share_error(comm, local_error, failing);
  }
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (int done = 0; !done;) {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done && std::chrono::steady_clock::now() >= deadline) {
      // The request stays pending: the caller is about to end the job, and MPI cannot cancel
      // a collective.
      throw AgreementTimeout(*local_error);
    }
    if (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return share_error(comm, local_error, failing);
}

std::optional<std::string> first_error_within(const Communicator& comm,
                                              const std::optional<std::string>& local_error,
                                              std::chrono::duration<double> timeout) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  const auto seconds = std::to_string(static_cast<long long>(timeout.count()));
  // A report and the answer: "0" (no failure) or "1" followed by the message.
  const std::string report = local_error ? "1" + *local_error : "0";
  const std::string answer = comm.is_root() ? answer_every_rank(comm, report, deadline, seconds)
                                            : report_to_root(comm, report, deadline, seconds);
  if (answer.front() == '0') {
    return std::nullopt;
  }
  return answer.substr(1);
}

}  // namespace epochrun
