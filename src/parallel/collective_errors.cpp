#include "collective_errors.hpp"

#include <spdlog/spdlog.h>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// One character tags the class so it survives the trip through MPI as text.
enum Kind : char {
  kUsage = 'U',
  kNotFound = 'N',
  kCorrupt = 'C',
  kMismatch = 'M',
  kCheckpoint = 'K',
  kSave = 'S',
  kOther = 'E',
};

std::string describe(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& e) {
    return char(kUsage) + std::string(e.what());
  } catch (const CheckpointNotFound& e) {
    return char(kNotFound) + std::string(e.what());
  } catch (const CorruptCheckpoint& e) {
    return char(kCorrupt) + std::string(e.what());
  } catch (const CheckpointMismatch& e) {
    return char(kMismatch) + std::string(e.what());
  } catch (const CheckpointError& e) {
    return char(kCheckpoint) + std::string(e.what());
  } catch (const SaveError& e) {
    return char(kSave) + std::string(e.what());
  } catch (const std::exception& e) {
    return char(kOther) + std::string(e.what());
  } catch (...) {
    return char(kOther) + std::string("unknown exception");
  }
}

[[noreturn]] void raise(char kind, const std::string& message) {
  switch (kind) {
    case kUsage:
      throw UsageError(message);
    case kNotFound:
      throw CheckpointNotFound(message);
    case kCorrupt:
      throw CorruptCheckpoint(message);
    case kMismatch:
      throw CheckpointMismatch(message);
    case kCheckpoint:
      throw CheckpointError(message);
    case kSave:
      throw SaveError(message);
    default:
      throw Error(message);
  }
}

// Throws the agreed error (as the class its tag names) with `context`; nothing when none.
void raise_agreed(const std::optional<std::string>& agreed, const std::string& context) {
  if (!agreed) {
    return;
  }
  // first_error may prefix "rank N: " before the tag; find the tag after it.
  std::string text = *agreed;
  std::string prefix;
  if (text.starts_with("rank ")) {
    auto colon = text.find(": ");
    prefix = text.substr(0, colon + 2);
    text = text.substr(colon + 2);
  }
  char kind = text.empty() ? char(kOther) : text.front();
  raise(kind, context + ": " + prefix + text.substr(text.empty() ? 0 : 1));
}

std::optional<std::string> describe_if_set(std::exception_ptr local_error) {
  if (!local_error) {
    return std::nullopt;
  }
  return describe(local_error);
}

}  // namespace

void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context) {
  raise_agreed(comm.first_error(describe_if_set(local_error)), context);
}

void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context, std::chrono::duration<double> patience) {
  std::optional<std::string> agreed;
  try {
    agreed = comm.first_error(describe_if_set(local_error), patience);
  } catch (const AgreementTimeout& timeout) {
    // Without the class tag describe() put in front.
    throw AgreementTimeout(context + ": " + std::string(timeout.what()).substr(1));
  }
  raise_agreed(agreed, context);
}

void raise_if_any_failed_within(const Communicator& comm, std::exception_ptr local_error,
                                const std::string& context, std::chrono::duration<double> timeout) {
  std::optional<std::string> agreed;
  try {
    agreed = comm.first_error_within(describe_if_set(local_error), timeout);
  } catch (const AgreementTimeout& timeout_error) {
    spdlog::critical("{}: {}; aborting the job rather than letting it hang", context,
                     timeout_error.what());
    spdlog::default_logger()->flush();
    comm.abort(static_cast<int>(ExitCode::kJobFailed));
  }
  raise_agreed(agreed, context);
}

void rethrow_with_context(std::exception_ptr error, const std::string& context) {
  auto tagged = describe(error);
  raise(tagged.front(), context + ": " + tagged.substr(1));
}

}  // namespace epochrun
