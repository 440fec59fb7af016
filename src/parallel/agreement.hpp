// The agreement protocols under collective_errors.hpp: each rank passes its own failure (or
// nothing), every rank learns the failure of the lowest failing rank. Plain text in, plain text
// out; collective_errors.cpp puts the error's class into that text and takes it back out.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "agreement_timeout.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun {

// Collective. Every rank gets the message of the lowest failing rank (prefixed "rank N: " unless
// N is 0), or nothing when all succeeded. Call it at the end of every step that can fail on some
// ranks only, so that no rank enters the next collective call alone.
std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error);

// first_error after a step that ran the job's own code, which may make collective calls of its
// own: a rank that failed waits at most `patience` for the others. A rank that does not come is
// most likely blocked in one of the job's collective calls that the failing rank will never
// make, and would wait forever; the failing rank then gets AgreementTimeout (its message is
// `local_error`) and should end the job, while ranks that did not fail wait as long as it
// takes. Every rank must call the same overload: this one uses a non-blocking reduction.
std::optional<std::string> first_error(const Communicator& comm,
                                       const std::optional<std::string>& local_error,
                                       std::chrono::duration<double> patience);

// first_error bounded on every rank, for the steps of a save or a load: no rank, failing or
// not, waits much more than `timeout` for the others to arrive (rank 0 `timeout`, the others one
// second more, so that rank 0 speaks first). One non-blocking reduction, as cheap as
// first_error whatever the rank count, waited for without holding a core (polite_wait.hpp).
// When it does not complete in time, a roll call (roll_call.hpp) finds the ranks that did not
// come, and every rank that did throws the same AgreementTimeout("ranks 1, 2 did not arrive
// within 600 s"; "rank 0 did not answer within 600 s" when rank 0 is the one missing).
// After a timeout, messages of this agreement may still be in flight: the caller must end the
// job (abort), not go on.
std::optional<std::string> first_error_within(const Communicator& comm,
                                              const std::optional<std::string>& local_error,
                                              std::chrono::duration<double> timeout);

// first_error_within whose reduction also carries `max_of`: each element becomes its maximum
// over the ranks, in the same collective (a step's agreement and the reduction after it in one;
// the maximum of ~x is ~(the minimum of x)). Every rank passes as many elements. When a rank
// failed, `max_of` is not to be used.
std::optional<std::string> first_error_within(const Communicator& comm,
                                              const std::optional<std::string>& local_error,
                                              std::chrono::duration<double> timeout,
                                              std::span<std::int64_t> max_of);

// first_error_within after a step only rank 0 worked in (the other ranks pass nothing): rank 0's
// outcome reaches every rank in one non-blocking broadcast, cheaper on many ranks than a
// reduction, since no rank waits for the others' arrival; a rank missing here is found by the
// next agreement of every rank. The same bounds and roll call as first_error_within.
std::optional<std::string> root_error_within(const Communicator& comm,
                                             const std::optional<std::string>& root_error,
                                             std::chrono::duration<double> timeout);
// The same, its broadcast also carrying rank 0's `values` to every rank (every rank passes as
// many elements): a step's outcome and what it made in one collective. When rank 0 failed,
// `values` are not to be used.
std::optional<std::string> root_error_within(const Communicator& comm,
                                             const std::optional<std::string>& root_error,
                                             std::chrono::duration<double> timeout,
                                             std::span<std::int64_t> values);

}  // namespace epochrun
