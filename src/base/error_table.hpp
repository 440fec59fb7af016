// The one table of epochrun's error classes: for each, the one character that names it when a
// failure travels between ranks (collective_errors.cpp) and the exit code the program returns
// (exit_code_for). A new class in errors.hpp gets its row here; tests/error_table_test.cpp walks
// every class through the agreements, the task groups and the exit code.
#pragma once

#include <exception>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "agreement_timeout.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {

struct ErrorClass {
  std::string_view name;
  char tag;  // on the wire: first_error carries the failure as this character and the message
  ExitCode exit_code;
  bool (*is_instance)(const std::exception& error);
  void (*raise)(const std::string& message);  // throws an exception of this class
};

template <typename E>
constexpr ErrorClass error_class(std::string_view name, char tag, ExitCode exit_code) {
  return {name, tag, exit_code,
          [](const std::exception& error) { return dynamic_cast<const E*>(&error) != nullptr; },
          [](const std::string& message) { throw E(message); }};
}

// Subclasses before their base: the first row an exception is an instance of is its class.
inline constexpr ErrorClass kErrorClasses[] = {
    error_class<UsageError>("UsageError", 'U', ExitCode::kUsageError),
    error_class<CheckpointNotFound>("CheckpointNotFound", 'N', ExitCode::kCheckpointError),
    error_class<CorruptCheckpoint>("CorruptCheckpoint", 'C', ExitCode::kCheckpointError),
    error_class<CheckpointMismatch>("CheckpointMismatch", 'M', ExitCode::kCheckpointError),
    error_class<CheckpointError>("CheckpointError", 'K', ExitCode::kCheckpointError),
    error_class<SaveError>("SaveError", 'S', ExitCode::kJobFailed),
    error_class<Hdf5Error>("Hdf5Error", 'H', ExitCode::kJobFailed),
    error_class<MpiError>("MpiError", 'P', ExitCode::kJobFailed),
    error_class<AgreementTimeout>("AgreementTimeout", 'T', ExitCode::kJobFailed),
    // Last, and the class of every exception that is not an epochrun one (std::bad_alloc, a
    // job's own): those fail the job.
    error_class<Error>("Error", 'E', ExitCode::kJobFailed),
};

// Error's row, the class of every exception of no other row.
constexpr const ErrorClass& plain_error_class() {
  return std::end(kErrorClasses)[-1];
}
static_assert(plain_error_class().name == "Error");

// The row of `error`'s class: its most derived class in the table, Error for any other.
const ErrorClass& error_class_of(const std::exception& error);
// The row tagged `tag`; Error's for a tag no row has.
const ErrorClass& error_class_tagged(char tag);
// Throws an exception of `error_class` with `message`.
[[noreturn]] void throw_as(const ErrorClass& error_class, const std::string& message);

// What each exit code means, in the words `epochrun --help` lists them (README's "Exit codes"
// table says more).
struct ExitCodeMeaning {
  ExitCode code;
  std::string_view meaning;
};
inline constexpr ExitCodeMeaning kExitCodeMeanings[] = {
    {ExitCode::kSuccess, "success"},
    {ExitCode::kJobFailed, "job failed"},
    {ExitCode::kUsageError, "usage or config error"},
    {ExitCode::kCheckpointError, "checkpoint error"},
    {ExitCode::kUploadFailed, "finished but the upload failed"},
    {ExitCode::kRequeue,
     "stopped early (preemption signal, time limit): run again with --resume-from-epoch latest"},
};

// Runs `read`, a step of reading a checkpoint, where any epochrun failure (a short read, an I/O
// error, a stored name or dtype that does not parse) means the checkpoint is not usable as it
// was committed: such an Error is rethrown as CorruptCheckpoint with `context` before its
// message. A CheckpointError keeps its class (a mismatch stays a mismatch); an exception of no
// epochrun class (std::bad_alloc) passes unchanged.
template <typename Read>
auto read_or_corrupt(Read&& read, const std::string& context = {}) -> decltype(read()) {
  try {
    return std::forward<Read>(read)();
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& error) {
    throw CorruptCheckpoint(context + error.what());
  }
}

}  // namespace epochrun
