#include "epochrun/communicator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "epochrun/errors.hpp"
#include "mpi_check.hpp"
#include "step_times.hpp"

namespace epochrun {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) {
    step_times::count_call(call);
    return;
  }
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(std::string(call) +
                 " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

namespace {

// A communicator MPI made for us, freed with the last copy of the Communicator holding it
// (unless MPI is finalized by then, when freeing it is an error and no longer matters).
std::shared_ptr<MPI_Comm> owned_communicator() {
  return std::shared_ptr<MPI_Comm>(new MPI_Comm(MPI_COMM_NULL), [](MPI_Comm* comm) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (*comm != MPI_COMM_NULL && !finalized) {
      MPI_Comm_free(comm);
    }
    delete comm;
  });
}

}  // namespace

Communicator Communicator::duplicate() const {
  auto owned = owned_communicator();
  check_mpi(MPI_Comm_dup(comm_, owned.get()), "MPI_Comm_dup");
  return Communicator(*owned, owned);
}

std::optional<Communicator> Communicator::split(int color, int key) const {
  auto owned = owned_communicator();
  check_mpi(MPI_Comm_split(comm_, color, key, owned.get()), "MPI_Comm_split");
  if (*owned == MPI_COMM_NULL) {
    return std::nullopt;
  }
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

void Communicator::exclusive_scan_sum_in_place(void* values, std::size_t count,
                                               MPI_Datatype type) const {
  int element_bytes = 0;
  check_mpi(MPI_Type_size(type, &element_bytes), "MPI_Type_size");
  std::vector<std::byte> below(count * static_cast<std::size_t>(element_bytes));
  check_mpi(MPI_Exscan(values, below.data(), to_count(count, "MPI_Exscan"), type, MPI_SUM, comm_),
            "MPI_Exscan");
  // MPI leaves rank 0's result undefined.
  if (rank() == 0) {
    std::fill(below.begin(), below.end(), std::byte{0});
  }
  std::memcpy(values, below.data(), below.size());
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

void Communicator::gather_fixed(const void* value, void* values, MPI_Datatype type,
                                int root) const {
  check_mpi(MPI_Gather(value, 1, type, values, 1, type, root, comm_), "MPI_Gather");
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

void Communicator::abort(int exit_code) const {
  MPI_Abort(comm_, exit_code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace epochrun
