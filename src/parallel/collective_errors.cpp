#include "collective_errors.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "agreement.hpp"
#include "epochrun/errors.hpp"
#include "error_table.hpp"

namespace epochrun {
namespace {

// The failure as it travels between ranks: its class's tag (error_table.hpp), then its message.
std::string describe(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return error_class_of(e).tag + std::string(e.what());
  } catch (...) {
    return plain_error_class().tag + std::string("unknown exception");
  }
}

// Throws the class `tagged` (a tag, then the message) names, with `context` before the message.
[[noreturn]] void raise(const std::string& tagged, const std::string& context) {
  if (tagged.empty()) {
    throw_as(plain_error_class(), context);
  }
  throw_as(error_class_tagged(tagged.front()), context + tagged.substr(1));
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
  raise(text, context + ": " + prefix);
}

std::optional<std::string> describe_if_set(std::exception_ptr local_error) {
  if (!local_error) {
    return std::nullopt;
  }
  return describe(local_error);
}

// The agreement `agree` makes, raised with `context`; when it times out, one critical line on
// every rank that came (see AgreementTimeout) and the job ends.
template <typename Agree>
void raise_within(const Communicator& comm, const std::string& context, Agree&& agree) {
  std::optional<std::string> agreed;
  try {
    agreed = agree();
  } catch (const AgreementTimeout& timeout_error) {
    spdlog::critical("{}: {}; aborting the job rather than letting it hang", context,
                     timeout_error.what());
    spdlog::default_logger()->flush();
    if (!comm.is_root()) {
      // Rank 0 ends the job once the ranks that came have its verdict: a rank that ended it
      // first could cut rank 0 off before its own line is out.
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    comm.abort(ExitCode::kJobFailed);
  }
  raise_agreed(agreed, context);
}

}  // namespace

void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context) {
  raise_agreed(first_error(comm, describe_if_set(local_error)), context);
}

void raise_if_any_failed(const Communicator& comm, std::exception_ptr local_error,
                         const std::string& context, std::chrono::duration<double> patience) {
  std::optional<std::string> agreed;
  try {
    agreed = first_error(comm, describe_if_set(local_error), patience);
  } catch (const AgreementTimeout& timeout) {
    // Without the class tag describe() put in front.
    throw AgreementTimeout(context + ": " + std::string(timeout.what()).substr(1));
  }
  raise_agreed(agreed, context);
}

void raise_if_any_failed_within(const Communicator& comm, std::exception_ptr local_error,
                                const std::string& context, std::chrono::duration<double> timeout,
                                std::span<std::int64_t> max_of) {
  raise_within(comm, context, [&] {
    return first_error_within(comm, describe_if_set(local_error), timeout, max_of);
  });
}

void raise_if_root_failed_within(const Communicator& comm, std::exception_ptr root_error,
                                 const std::string& context, std::chrono::duration<double> timeout,
                                 std::span<std::int64_t> values) {
  raise_within(comm, context, [&] {
    return root_error_within(comm, describe_if_set(root_error), timeout, values);
  });
}

void record_agreed_step(const std::string& context, step_times::Clock::time_point started,
                        step_times::Clock::time_point worked) {
  if (!step_times::recording()) {
    return;
  }
  const auto last = context.rfind(": ");
  const auto& named = step_times::current_name();
  const auto step = !named.empty()              ? named
                    : last == std::string::npos ? context
                                                : context.substr(last + 2);
  step_times::add(step, std::chrono::duration<double>(worked - started).count());
  step_times::add_since(step + " (agree)", worked);
}

void rethrow_with_context(std::exception_ptr error, const std::string& context) {
  raise(describe(error), context + ": ");
}

}  // namespace epochrun
