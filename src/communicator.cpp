#include "epochrun/communicator.hpp"

#include <limits>
#include <thread>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

int to_count(std::size_t size, const char* what) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw MpiError(std::string(what) + ": " + std::to_string(size) +
                   " bytes exceed MPI's int count");
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

void Communicator::broadcast(std::int64_t& value, int root) const {
  check_mpi(MPI_Bcast(&value, 1, MPI_INT64_T, root, comm_), "MPI_Bcast");
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

void Communicator::allreduce_sum(std::span<double> values) const {
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), to_count(values.size(), "MPI_Allreduce"),
                          MPI_DOUBLE, MPI_SUM, comm_),
            "MPI_Allreduce");
}

std::int64_t Communicator::allreduce_sum(std::int64_t value) const {
  std::int64_t sum = 0;
  check_mpi(MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Allreduce");
  return sum;
}

double Communicator::allreduce_max(double value) const {
  double max = 0;
  check_mpi(MPI_Allreduce(&value, &max, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce");
  return max;
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
