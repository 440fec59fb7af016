// Failures that happen on some ranks only, turned into the same exception on every rank.
//
// MPI collectives and parallel HDF5 need every rank to make the same calls in the same order.
// A rank that throws alone would leave the others waiting forever, so every step that can fail
// locally ends with raise_if_any_failed: all ranks then throw an exception of the class the
// lowest failing rank threw, with its message, or all go on.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "agreement_timeout.hpp"
#include "epochrun/communicator.hpp"
#include "step_times.hpp"

namespace epochrun {

// Collective. `local_error` is this rank's captured exception, or null. `context` is prefixed
// to the message ("save epoch 3: ...").
void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context);
// The same after running the job's own code: see first_error with patience (agreement.hpp). On a
// failing rank whose peers did not come within `patience`, throws AgreementTimeout with the
// context and this rank's message.
void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context, std::chrono::duration<double> patience);

// The same, bounded on every rank (first_error_within, agreement.hpp): for the steps of a save
// or a load, where a rank that is stuck (a hung disk, a stopped process) must not hold the
// others forever. When the ranks do not all arrive within `timeout`, logs one critical line
// naming `context` and the ranks that did not come, and ends the job (MPI_Abort,
// ExitCode::kJobFailed).
void raise_if_any_failed_within(const Communicator& comm, std::exception_ptr local_error,
                                const std::string& context, std::chrono::duration<double> timeout,
                                std::span<std::int64_t> max_of = {});

// When this thread records step times (step_times.hpp): the step `context` names (its last
// ": " part) took from `started` to `worked`, and its agreement from then to now.
void record_agreed_step(const std::string& context, step_times::Clock::time_point started,
                        step_times::Clock::time_point worked);

// Runs `step` and returns what it threw, null when nothing.
template <typename Step>
std::exception_ptr failure_of(Step&& step) {
  try {
    step();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Collective: runs `step` on this rank, then raise_if_any_failed_within. `max_of` (the same
// count on every rank), set by `step` or before, travels in the agreement's reduction: each
// element is its maximum over the ranks when this returns.
template <typename Step>
void run_then_agree_within(const Communicator& comm, const std::string& context,
                           std::chrono::duration<double> timeout, Step&& step,
                           std::span<std::int64_t> max_of = {}) {
  const auto started = step_times::Clock::now();
  const auto error = failure_of(step);
  const auto worked = step_times::Clock::now();
  raise_if_any_failed_within(comm, error, context, timeout, max_of);
  record_agreed_step(context, started, worked);
}

// raise_if_any_failed_within after a step only rank 0 worked in (`root_error` is null on the
// other ranks): rank 0's outcome is broadcast (root_error_within, agreement.hpp).
// `values` (the same count on every rank) travel with rank 0's outcome: rank 0's reach every
// rank.
void raise_if_root_failed_within(const Communicator& comm, std::exception_ptr root_error,
                                 const std::string& context, std::chrono::duration<double> timeout,
                                 std::span<std::int64_t> values = {});

// Collective: `step` run on rank 0 alone, then raise_if_root_failed_within. `values`, which
// `step` sets on rank 0, are rank 0's on every rank when this returns.
template <typename Step>
void run_on_root_then_agree_within(const Communicator& comm, const std::string& context,
                                   std::chrono::duration<double> timeout, Step&& step,
                                   std::span<std::int64_t> values = {}) {
  const auto started = step_times::Clock::now();
  const auto error = comm.is_root() ? failure_of(step) : nullptr;
  const auto worked = step_times::Clock::now();
  raise_if_root_failed_within(comm, error, context, timeout, values);
  record_agreed_step(context, started, worked);
}

// Collective: runs `step` on this rank and raises the first failure of any rank on every rank,
// with `context`.
template <typename Step>
void run_then_agree(const Communicator& comm, const std::string& context, Step&& step) {
  raise_if_any_failed(comm, failure_of(step), context);
}

// Collective: run_then_agree with `step` run on rank 0 alone (the directory is shared; rank 0
// decides for everyone).
template <typename Step>
void run_on_root_then_agree(const Communicator& comm, const std::string& context, Step&& step) {
  run_then_agree(comm, context, [&] {
    if (comm.is_root()) {
      step();
    }
  });
}

// Rethrows `error` as the same epochrun class with `context` prefixed to its message.
[[noreturn]] void rethrow_with_context(std::exception_ptr error, const std::string& context);

}  // namespace epochrun
