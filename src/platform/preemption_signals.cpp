#include "preemption_signals.hpp"

#include <algorithm>
#include <csignal>
#include <map>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

volatile std::sig_atomic_t received_signal = 0;

// The disposition each signal had before a run first caught it: a later run of the same process
// (a program embedding the runner) that does not list it gives it back.
std::map<int, struct sigaction>& original_dispositions() {
  static std::map<int, struct sigaction> originals;
  return originals;
}

extern "C" void record_preemption_signal(int signal) {
  if (received_signal == 0) {
    received_signal = signal;
  }
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

PreemptionSignals::PreemptionSignals(const std::vector<int>& signals) {
  auto& originals = original_dispositions();
  for (auto caught = originals.begin(); caught != originals.end();) {
    if (std::find(signals.begin(), signals.end(), caught->first) == signals.end()) {
      sigaction(caught->first, &caught->second, nullptr);
      caught = originals.erase(caught);
    } else {
      ++caught;
    }
  }
  received_signal = 0;
  for (int signal : signals) {
    struct sigaction action {};
    action.sa_handler = record_preemption_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESTART: the MPI and HDF5 calls under way carry on. No SA_RESETHAND: a repeated
    // signal is the same request (see the header).
    action.sa_flags = SA_RESTART;
    struct sigaction before {};
    sigaction(signal, &action, &before);
    originals.emplace(signal, before);
  }
}

int PreemptionSignals::received() {
  return received_signal;
}

}  // namespace epochrun
