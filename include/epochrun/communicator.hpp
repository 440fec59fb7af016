// A small value type over an MPI communicator, so rank-0 logic reads as
// `if (comm.rank() == 0)` and collective helpers carry their own error checks.
#pragma once

#include <mpi.h>

#include <chrono>
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

class Communicator {
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

  int rank() const;
  int size() const;
  bool is_root() const { return rank() == 0; }
  MPI_Comm raw() const { return comm_; }

  void barrier() const;
  // True on every rank when `value` is true on every rank / on at least one rank.
  bool all_true(bool value) const;
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

  // Collective error agreement: each rank passes its own failure (or nothing); every rank
  // gets the message of the lowest failing rank (prefixed "rank N: " unless N is 0), or nothing
  // when all succeeded. Call it at the end of every step that can fail on some ranks only, so that
  // no rank enters the next collective call alone.
  std::optional<std::string> first_error(const std::optional<std::string>& local_error) const;

  // first_error after a step that ran the job's own code, which may make collective calls of
  // its own: a rank that failed waits at most `patience` for the others. A rank that does not
  // come is most likely blocked in one of the job's collective calls that the failing rank
  // will never make, and would wait forever; the failing rank then gets AgreementTimeout (and
  // should end the job), while ranks that did not fail wait as long as it takes. Every rank
  // must call the same overload: this one uses a non-blocking reduction.
  std::optional<std::string> first_error(const std::optional<std::string>& local_error,
                                         std::chrono::duration<double> patience) const;

  // first_error bounded on every rank, for the steps of a save or a load: no rank, failing or
  // not, waits much more than `timeout` for the others to arrive (rank 0 `timeout`, the others
  // one second more, so that rank 0 speaks first). Built on point-to-point messages to rank 0,
  // which answers every rank, so that the rank that gives up can name who did not come:
  // AgreementTimeout("ranks 1, 2 did not arrive within 600 s", or "rank 0 did not answer ...").
  // After a timeout, messages of this agreement may still be in flight: the caller must end
  // the job (abort), not go on.
  std::optional<std::string> first_error_within(const std::optional<std::string>& local_error,
                                                std::chrono::duration<double> timeout) const;

  // MPI_Abort on this communicator: ends every rank of the job with `exit_code`.
  [[noreturn]] void abort(int exit_code) const;

 private:
  void allreduce_in_place(void* values, std::size_t count, MPI_Datatype type, Reduction op) const;
  void broadcast_in_place(void* values, std::size_t count, MPI_Datatype type, int root) const;
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
      std::memcpy(elements.data(), part.data(), part.size());
    }
    return values;
  }

  // first_error_within's message from `source`, or nullopt when none came before `deadline`.
  std::optional<std::string> receive_within(int source,
                                            std::chrono::steady_clock::time_point deadline) const;
  // The message of the lowest failing rank, as first_error returns it, once `failing` is known.
  std::optional<std::string> share_error(const std::optional<std::string>& local_error,
                                         int failing) const;

  Communicator(MPI_Comm comm, std::shared_ptr<MPI_Comm> owned)
      : comm_(comm), owned_(std::move(owned)) {}

  MPI_Comm comm_;
  std::shared_ptr<MPI_Comm> owned_;  // set only for duplicates; frees the communicator
};

// Throws MpiError with the MPI error string when `code` is not MPI_SUCCESS.
void check_mpi(int code, const char* call);

}  // namespace epochrun
