#include "epochrun/communicator.hpp"

#include <cstdlib>
#include <limits>
#include <thread>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// The tag of first_error_within's messages. Messages between two ranks with one tag arrive in
// order, so consecutive agreements never mix.
constexpr int kAgreementTag = 7301;

int to_count(std::size_t size, const char* what) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw MpiError(std::string(what) + ": " + std::to_string(size) +
                   " elements exceed MPI's int count");
  }
  return static_cast<int>(size);
}

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) {
    return;
  }
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(std::string(call) +
                 " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

Communicator Communicator::duplicate() const {
  auto owned = std::shared_ptr<MPI_Comm>(new MPI_Comm(MPI_COMM_NULL), [](MPI_Comm* comm) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (*comm != MPI_COMM_NULL && !finalized) {
      MPI_Comm_free(comm);
    }
    delete comm;
  });
  check_mpi(MPI_Comm_dup(comm_, owned.get()), "MPI_Comm_dup");
  return Communicator(*owned, owned);
}

int Communicator::rank() const {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm_, &rank), "MPI_Comm_rank");
  return rank;
}

int Communicator::size() const {
  int size = 0;
  check_mpi(MPI_Comm_size(comm_, &size), "MPI_Comm_size");
  return size;
}

void Communicator::barrier() const {
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

bool Communicator::all_true(bool value) const {
  int local = value ? 1 : 0;
  int global = 0;
  check_mpi(MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_LAND, comm_), "MPI_Allreduce");
  return global != 0;
}

bool Communicator::any_true(bool value) const {
  int local = value ? 1 : 0;
  int global = 0;
  check_mpi(MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_LOR, comm_), "MPI_Allreduce");
  return global != 0;
}

void Communicator::broadcast(std::vector<std::byte>& value, int root) const {
  auto size = static_cast<std::int64_t>(value.size());
  broadcast(size, root);
  value.resize(static_cast<std::size_t>(size));
  check_mpi(MPI_Bcast(value.data(), to_count(value.size(), "MPI_Bcast"), MPI_BYTE, root, comm_),
            "MPI_Bcast");
}

void Communicator::broadcast(std::vector<std::int64_t>& values, int root) const {
  auto size = static_cast<std::int64_t>(values.size());
  broadcast(size, root);
  values.resize(static_cast<std::size_t>(size));
  check_mpi(
      MPI_Bcast(values.data(), to_count(values.size(), "MPI_Bcast"), MPI_INT64_T, root, comm_),
      "MPI_Bcast");
}

void Communicator::broadcast(std::string& value, int root) const {
  auto size = static_cast<std::int64_t>(value.size());
  broadcast(size, root);
  value.resize(static_cast<std::size_t>(size));
  check_mpi(MPI_Bcast(value.data(), to_count(value.size(), "MPI_Bcast"), MPI_CHAR, root, comm_),
            "MPI_Bcast");
}

void Communicator::allreduce_in_place(void* values, std::size_t count, MPI_Datatype type,
                                      Reduction op) const {
  const MPI_Op mpi_op = op == Reduction::kSum ? MPI_SUM : op == Reduction::kMax ? MPI_MAX : MPI_MIN;
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, values, to_count(count, "MPI_Allreduce"), type, mpi_op, comm_),
      "MPI_Allreduce");
}

void Communicator::broadcast_in_place(void* values, std::size_t count, MPI_Datatype type,
                                      int root) const {
  check_mpi(MPI_Bcast(values, to_count(count, "MPI_Bcast"), type, root, comm_), "MPI_Bcast");
}

void Communicator::sendrecv_bytes(const void* send, std::size_t send_count, int destination,
                                  void* receive, std::size_t receive_count, int source, int tag,
                                  MPI_Datatype type) const {
  check_mpi(MPI_Sendrecv(send, to_count(send_count, "MPI_Sendrecv"), type, destination, tag,
                         receive, to_count(receive_count, "MPI_Sendrecv"), type, source, tag, comm_,
                         MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
}

std::vector<std::string> Communicator::allgather(const std::string& value) const {
  const int ranks = size();
  int length = to_count(value.size(), "MPI_Allgather");
  std::vector<int> lengths(static_cast<std::size_t>(ranks));
  check_mpi(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_), "MPI_Allgather");
  std::vector<int> offsets(lengths.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = to_count(total, "MPI_Allgatherv");
    total += static_cast<std::size_t>(lengths[i]);
  }
  std::string joined(total, '\0');
  check_mpi(MPI_Allgatherv(value.data(), length, MPI_CHAR, joined.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, comm_),
            "MPI_Allgatherv");
  std::vector<std::string> values;
  values.reserve(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    values.push_back(
        joined.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lengths[i])));
  }
  return values;
}

std::vector<std::vector<std::byte>> Communicator::gather(std::span<const std::byte> value,
                                                         int root) const {
  const bool at_root = rank() == root;
  int length = to_count(value.size(), "MPI_Gather");
  std::vector<int> lengths(at_root ? static_cast<std::size_t>(size()) : 0);
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm_), "MPI_Gather");
  std::vector<int> offsets(lengths.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = to_count(total, "MPI_Gatherv");
    total += static_cast<std::size_t>(lengths[i]);
  }
  std::vector<std::byte> joined(total);
  check_mpi(MPI_Gatherv(value.data(), length, MPI_BYTE, joined.data(), lengths.data(),
                        offsets.data(), MPI_BYTE, root, comm_),
            "MPI_Gatherv");
  std::vector<std::vector<std::byte>> values;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    auto begin = joined.begin() + offsets[i];
    values.emplace_back(begin, begin + lengths[i]);
  }
  return values;
}

std::vector<std::byte> Communicator::scatter(const std::vector<std::vector<std::byte>>& parts,
                                             int root) const {
  const bool at_root = rank() == root;
  if (at_root && parts.size() != static_cast<std::size_t>(size())) {
    throw MpiError("MPI_Scatterv: " + std::to_string(parts.size()) + " parts for " +
                   std::to_string(size()) + " ranks");
  }
  std::vector<int> lengths;
  std::vector<int> offsets;
  std::vector<std::byte> joined;
  for (const auto& part : at_root ? parts : std::vector<std::vector<std::byte>>{}) {
    lengths.push_back(to_count(part.size(), "MPI_Scatter"));
    offsets.push_back(to_count(joined.size(), "MPI_Scatterv"));
    joined.insert(joined.end(), part.begin(), part.end());
  }
  int length = 0;
  check_mpi(MPI_Scatter(lengths.data(), 1, MPI_INT, &length, 1, MPI_INT, root, comm_),
            "MPI_Scatter");
  std::vector<std::byte> mine(static_cast<std::size_t>(length));
  check_mpi(MPI_Scatterv(joined.data(), lengths.data(), offsets.data(), MPI_BYTE, mine.data(),
                         length, MPI_BYTE, root, comm_),
            "MPI_Scatterv");
  return mine;
}

std::optional<std::string> Communicator::first_error(
    const std::optional<std::string>& local_error) const {
  int candidate = local_error ? rank() : std::numeric_limits<int>::max();
  int failing = 0;
  check_mpi(MPI_Allreduce(&candidate, &failing, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
  return share_error(local_error, failing);
}

std::optional<std::string> Communicator::first_error(const std::optional<std::string>& local_error,
                                                     std::chrono::duration<double> patience) const {
  int candidate = local_error ? rank() : std::numeric_limits<int>::max();
  int failing = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(&candidate, &failing, 1, MPI_INT, MPI_MIN, comm_, &request),
            "MPI_Iallreduce");
  if (!local_error) {
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    return share_error(local_error, failing);
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
  return share_error(local_error, failing);
}

std::optional<std::string> Communicator::first_error_within(
    const std::optional<std::string>& local_error, std::chrono::duration<double> timeout) const {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  const auto seconds = std::to_string(static_cast<long long>(timeout.count()));
  // A report and the answer: "0" (no failure) or "1" followed by the message.
  const std::string report = local_error ? "1" + *local_error : "0";
  if (!is_root()) {
    MPI_Request sent = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(report.data(), to_count(report.size(), "MPI_Isend"), MPI_CHAR, 0,
                        kAgreementTag, comm_, &sent),
              "MPI_Isend");
    // A little longer than rank 0, which can name the ranks that did not come, so that it is
    // the one to speak when rank 0 itself is not the one stuck.
    auto answer = receive_within(0, deadline + std::chrono::seconds(1));
    if (!answer) {
      throw AgreementTimeout("rank 0 did not answer within " + seconds + " s");
    }
    // Rank 0 answers only after it received the report: the send is complete.
    check_mpi(MPI_Wait(&sent, MPI_STATUS_IGNORE), "MPI_Wait");
    if (answer->front() == '0') {
      return std::nullopt;
    }
    return answer->substr(1);
  }

  std::vector<std::optional<std::string>> reports(static_cast<std::size_t>(size()));
  reports[0] = report;
  for (int source = 1; source < size(); ++source) {
    reports[static_cast<std::size_t>(source)] = receive_within(source, deadline);
  }
  std::string missing;
  int missing_count = 0;
  std::string answer = "0";
  for (int source = size() - 1; source >= 0; --source) {
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
  std::vector<MPI_Request> answers(static_cast<std::size_t>(size() - 1), MPI_REQUEST_NULL);
  for (int target = 1; target < size(); ++target) {
    check_mpi(MPI_Isend(answer.data(), to_count(answer.size(), "MPI_Isend"), MPI_CHAR, target,
                        kAgreementTag, comm_, &answers[static_cast<std::size_t>(target - 1)]),
              "MPI_Isend");
  }
  // Every rank reported and waits for its answer, so these complete; MPI_Waitall cannot hang.
  check_mpi(MPI_Waitall(static_cast<int>(answers.size()), answers.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  return answer.front() == '0' ? std::nullopt : std::optional(answer.substr(1));
}

std::optional<std::string> Communicator::receive_within(
    int source, std::chrono::steady_clock::time_point deadline) const {
  for (;;) {
    int arrived = 0;
    MPI_Status status{};
    check_mpi(MPI_Iprobe(source, kAgreementTag, comm_, &arrived, &status), "MPI_Iprobe");
    if (arrived) {
      int length = 0;
      check_mpi(MPI_Get_count(&status, MPI_CHAR, &length), "MPI_Get_count");
      std::string message(static_cast<std::size_t>(length), '\0');
      check_mpi(MPI_Recv(message.data(), length, MPI_CHAR, source, kAgreementTag, comm_,
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

void Communicator::abort(int exit_code) const {
  MPI_Abort(comm_, exit_code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

std::optional<std::string> Communicator::share_error(const std::optional<std::string>& local_error,
                                                     int failing) const {
  if (failing == std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  std::string message = local_error && failing == rank() ? *local_error : std::string();
  broadcast(message, failing);
  // Rank 0 is where decisions are made; naming other ranks tells which node failed.
  if (failing == 0) {
    return message;
  }
  return "rank " + std::to_string(failing) + ": " + message;
}

}  // namespace epochrun
