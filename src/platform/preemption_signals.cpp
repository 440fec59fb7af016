#include "preemption_signals.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <map>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// Atomic, not only sig_atomic_t: a run takes over a start-up signal with one exchange, so that
// a signal coming at that instant is neither lost nor counted twice. Lock-free, hence safe in a
// handler.
std::atomic<int> received_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
// Set by catch_preemption_signals_at_start_up() until the first run takes over what it caught.
std::atomic<bool> start_up_catch{false};

// The disposition each signal had before a run first caught it: a later run of the same process
// (a program embedding the runner) that does not list it gives it back.
std::map<int, struct sigaction>& original_dispositions() {
  static std::map<int, struct sigaction> originals;
  return originals;
}

extern "C" void record_preemption_signal(int signal) {
  int none = 0;
  received_signal.compare_exchange_strong(none, signal);
}

// The signals a scheduler or a user sends to ask a job to end; never the ones a debugger, a
// terminal or the kernel uses for other purposes (STOP, CONT, SEGV, ...).
const std::map<std::string, int>& known_signals() {
  static const std::map<std::string, int> kSignals = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"TERM", SIGTERM},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"XCPU", SIGXCPU}};
  return kSignals;
}

}  // namespace

std::vector<int> parse_preemption_signals(const std::string& text) {
  std::vector<int> signals;
  if (text == "none") {
    return signals;
  }
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const auto end = std::min(text.find(',', begin), text.size());
    const std::string name = text.substr(begin, end - begin);
    const auto found = known_signals().find(name);
    if (found == known_signals().end()) {
      std::string known;
      for (const auto& [known_name, number] : known_signals()) {
        known += (known.empty() ? "" : ", ") + known_name;
      }
      throw UsageError("invalid --preempt-signals '" + text + "': unknown signal '" + name +
                       "' (names without SIG: " + known + "; or none)");
    }
    if (std::find(signals.begin(), signals.end(), found->second) == signals.end()) {
      signals.push_back(found->second);
    }
    begin = end + 1;
  }
  return signals;
}

std::string signal_name(int signal) {
  for (const auto& [name, number] : known_signals()) {
    if (number == signal) {
      return "SIG" + name;
    }
  }
  return "signal " + std::to_string(signal);
}

namespace {

// The flag-only handler for each of `signals`; the disposition each had before its first one is
// kept (emplace leaves an earlier entry alone).
void catch_signals(const std::vector<int>& signals) {
  for (int signal : signals) {
    struct sigaction action {};
    action.sa_handler = record_preemption_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESTART: the MPI and HDF5 calls under way carry on. No SA_RESETHAND: a repeated
    // signal is the same request (see the header).
    action.sa_flags = SA_RESTART;
    struct sigaction before {};
    sigaction(signal, &action, &before);
    original_dispositions().emplace(signal, before);
  }
}

}  // namespace

void catch_preemption_signals_at_start_up() {
  start_up_catch = true;
  catch_signals(parse_preemption_signals(kDefaultPreemptSignals));
}

PreemptionSignals::PreemptionSignals(const std::vector<int>& signals) {
  const auto listed = [&](int signal) {
    return std::find(signals.begin(), signals.end(), signal) != signals.end();
  };
  // Cleared before anything is installed, as for every run: a signal from here on is this
  // run's. What the start-up catch took before is handed over below.
  const bool first_run = start_up_catch.exchange(false);
  const int earlier = received_signal.exchange(0);
  // Caught before the others are given back, so that no listed signal finds its old
  // disposition on the way.
  catch_signals(signals);
  auto& originals = original_dispositions();
  for (auto caught = originals.begin(); caught != originals.end();) {
    if (!listed(caught->first)) {
      sigaction(caught->first, &caught->second, nullptr);
      caught = originals.erase(caught);
    } else {
      ++caught;
    }
  }
  if (first_run && earlier != 0) {
    if (listed(earlier)) {
      record_preemption_signal(earlier);
    } else {
      std::raise(earlier);
    }
  }
}

int PreemptionSignals::received() {
  return received_signal;
}

}  // namespace epochrun
