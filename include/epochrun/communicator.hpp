// A small value type over an MPI communicator, so rank-0 logic reads as
// `if (comm.rank() == 0)` and collective helpers carry their own error checks.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "epochrun/errors.hpp"

namespace epochrun {

// Thrown by the bounded first_error on a rank that failed when the other ranks did not come to
// the agreement in time.
class AgreementTimeout : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
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
  void broadcast(std::int64_t& value, int root = 0) const;
  void broadcast(std::vector<std::byte>& value, int root = 0) const;
  void broadcast(std::vector<std::int64_t>& values, int root = 0) const;

  // Element-wise sum over all ranks, in place on every rank.
  void allreduce_sum(std::span<double> values) const;
  std::int64_t allreduce_sum(std::int64_t value) const;
  double allreduce_max(double value) const;

  std::vector<std::string> allgather(const std::string& value) const;
  // Every rank's bytes on `root`, in rank order; empty elsewhere.
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> value, int root = 0) const;

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
