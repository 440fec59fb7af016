// A small value type over an MPI communicator, so rank-0 logic reads as
// `if (comm.rank() == 0)` and collective helpers carry their own error checks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "epochrun/dtype.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/export.hpp"

namespace epochrun {

// An element type, const or not (what a span a collective only reads may hold).
template <typename T>
concept ConstElement = Element<std::remove_const_t<T>>;

// The element-wise operation of Communicator::allreduce.
enum class Reduction { kSum, kMax, kMin };

// The MPI datatype of a blob element type.
template <Element T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>) {
    return MPI_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return MPI_DOUBLE;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return MPI_INT32_T;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return MPI_INT64_T;
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return MPI_UINT8_T;
  } else {
    static_assert(std::is_same_v<T, std::byte>);
    return MPI_BYTE;
  }
}

class EPOCHRUN_API Communicator {
 public:
  // A neighbour that does not exist (beyond the edge of a domain): sendrecv skips that side.
  static constexpr int kNoRank = MPI_PROC_NULL;

  // Non-owning views of the predefined communicators.
  static Communicator world() { return Communicator(MPI_COMM_WORLD); }
  static Communicator self() { return Communicator(MPI_COMM_SELF); }
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}

  // A private duplicate (MPI_Comm_dup), freed when the last copy goes away, so a library's
  // messages can never match a user's.
  Communicator duplicate() const;

  // The `color` of a rank that joins no part in split().
  static constexpr int kNoColor = MPI_UNDEFINED;
  // Collective: the ranks passing the same `color` (>= 0) as a communicator of their own
  // (MPI_Comm_split), ranked by `key` and then by their rank here, freed when the last copy goes
  // away; std::nullopt on the ranks passing kNoColor, which take part in the call only. A part
  // of the ranks can then work on its own, e.g. read at fewer ranks what all of them wrote.
  std::optional<Communicator> split(int color, int key = 0) const;

  int rank() const;
  int size() const;
  bool is_root() const { return rank() == 0; }
  MPI_Comm raw() const { return comm_; }

  void barrier() const;
  // True on every rank when `value` is true on at least one rank.
  bool any_true(bool value) const;

  void broadcast(std::string& value, int root = 0) const;
  void broadcast(std::vector<std::byte>& value, int root = 0) const;
  void broadcast(std::vector<std::int64_t>& values, int root = 0) const;

  // Typed collectives over spans of the blob element types, so that a job needs no raw MPI
  // (pass a vector as std::span(vector)). Every rank passes the same number of elements unless
  // said otherwise.

  // Element-wise `op` over all ranks, in place on every rank.
  template <Element T, std::size_t N>
  void allreduce(std::span<T, N> values, Reduction op) const {
    static_assert(!std::is_same_v<T, std::byte>, "opaque bytes cannot be reduced");
    allreduce_in_place(values.data(), values.size(), mpi_datatype<T>(), op);
  }
  template <Element T>
  T allreduce(T value, Reduction op) const {
    allreduce(std::span<T>(&value, 1), op);
    return value;
  }
  double allreduce_max(double value) const { return allreduce(value, Reduction::kMax); }

  // Element-wise sum over the ranks below this one, in place (MPI_Exscan): where this rank's
  // part starts when every rank's parts lie back to back in rank order. Zeros on rank 0.
  template <Element T, std::size_t N>
  void exclusive_scan_sum(std::span<T, N> values) const {
    static_assert(!std::is_same_v<T, std::byte>, "opaque bytes cannot be summed");
    exclusive_scan_sum_in_place(values.data(), values.size(), mpi_datatype<T>());
  }

  // Root's elements into `values` on every rank.
  template <Element T, std::size_t N>
  void broadcast(std::span<T, N> values, int root = 0) const {
    broadcast_in_place(values.data(), values.size(), mpi_datatype<T>(), root);
  }
  template <Element T>
  void broadcast(T& value, int root = 0) const {
    broadcast(std::span<T>(&value, 1), root);
  }

  // Every rank's elements (any number per rank), in rank order: on `root` only (empty
  // elsewhere) for gather, on every rank for allgather.
  template <ConstElement T, std::size_t N>
  std::vector<std::vector<std::remove_const_t<T>>> gather(std::span<T, N> values,
                                                          int root = 0) const {
    return from_bytes<std::remove_const_t<T>>(
        gather(std::span<const std::byte>(std::as_bytes(values)), root));
  }
  // One element per rank, in rank order, on `root` only (empty elsewhere): one MPI_Gather.
  template <Element T>
  std::vector<T> gather(T value, int root = 0) const {
    std::vector<T> values(rank() == root ? static_cast<std::size_t>(size()) : 0);
    gather_fixed(&value, values.data(), mpi_datatype<T>(), root);
    return values;
  }
  template <ConstElement T, std::size_t N>
  std::vector<std::vector<std::remove_const_t<T>>> allgather(std::span<T, N> values) const {
    const auto bytes = std::as_bytes(values);
    std::vector<std::vector<std::byte>> parts;
    for (const auto& part :
         allgather(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()))) {
      const auto* first = reinterpret_cast<const std::byte*>(part.data());
      parts.emplace_back(first, first + part.size());
    }
    return from_bytes<std::remove_const_t<T>>(parts);
  }

  // Sends `send` to `destination` while receiving `receive` from `source` (MPI_Sendrecv), as a
  // halo exchange does along a chain of ranks without deadlock. kNoRank skips a side.
  template <ConstElement S, std::size_t N, Element T, std::size_t M>
  requires std::is_same_v<std::remove_const_t<S>, T>
  void sendrecv(std::span<S, N> send, int destination, std::span<T, M> receive, int source,
                int tag = 0) const {
    sendrecv_bytes(send.data(), send.size(), destination, receive.data(), receive.size(), source,
                   tag, mpi_datatype<T>());
  }

  std::vector<std::string> allgather(const std::string& value) const;
  // Every rank's bytes on `root`, in rank order; empty elsewhere.
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> value, int root = 0) const;
  // The inverse: `root` passes one part per rank (ignored elsewhere), each rank gets its own.
  std::vector<std::byte> scatter(const std::vector<std::vector<std::byte>>& parts,
                                 int root = 0) const;

  // MPI_Abort on this communicator: ends every rank of the job with `exit_code`.
  [[noreturn]] void abort(int exit_code) const;
  [[noreturn]] void abort(ExitCode exit_code) const { abort(static_cast<int>(exit_code)); }

 private:
  void allreduce_in_place(void* values, std::size_t count, MPI_Datatype type, Reduction op) const;
  void broadcast_in_place(void* values, std::size_t count, MPI_Datatype type, int root) const;
  void gather_fixed(const void* value, void* values, MPI_Datatype type, int root) const;
  void exclusive_scan_sum_in_place(void* values, std::size_t count, MPI_Datatype type) const;
  void sendrecv_bytes(const void* send, std::size_t send_count, int destination, void* receive,
                      std::size_t receive_count, int source, int tag, MPI_Datatype type) const;
  // Byte buffers as element vectors (a trailing partial element is an error).
  template <Element T>
  static std::vector<std::vector<T>> from_bytes(const std::vector<std::vector<std::byte>>& parts) {
    std::vector<std::vector<T>> values;
    values.reserve(parts.size());
    for (const auto& part : parts) {
      if (part.size() % sizeof(T) != 0) {
        throw MpiError("received " + std::to_string(part.size()) +
                       " bytes, not a whole number of elements");
      }
      auto& elements = values.emplace_back(part.size() / sizeof(T));
      if (!part.empty()) {  // an empty part may have no storage: memcpy needs a pointer
        std::memcpy(elements.data(), part.data(), part.size());
      }
    }
    return values;
  }

  Communicator(MPI_Comm comm, std::shared_ptr<MPI_Comm> owned)
      : comm_(comm), owned_(std::move(owned)) {}

  MPI_Comm comm_;
  std::shared_ptr<MPI_Comm> owned_;  // set only for duplicates; frees the communicator
};

}  // namespace epochrun
