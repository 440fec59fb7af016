// Preemption signals (SIGUSR1, SIGTERM, ...): a handler that only records the signal, read by
// the runner at its stop decision. Internal to the library.
//
// The handler sets one sig_atomic_t and nothing else, so it is safe whatever the rank was doing
// (inside MPI, HDF5 or malloc). SA_RESETHAND gives the signal its default action back on first
// delivery: a second one of the same kind stops the process at once, and once the runner has
// decided to stop, restore_defaults() does the same for every preemption signal.
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace epochrun {

// "USR1,TERM" -> {SIGUSR1, SIGTERM}; "none" -> {}. Names without the SIG prefix; throws
// UsageError naming an unknown one.
std::vector<int> parse_preemption_signals(const std::string& text);
// "SIGUSR1".
std::string signal_name(int signal);

class PreemptionSignals {
 public:
  // Clears the record and installs the flag-only handler for each of `signals`.
  explicit PreemptionSignals(std::vector<int> signals);
  // Gives each signal back the disposition it had before.
  ~PreemptionSignals();
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The first preemption signal this process received, 0 when none.
  static int received();
  // From the decision to stop on: any further preemption signal takes its default action
  // (for TERM and USR1: the process ends at once, without a new checkpoint).
  void restore_defaults() const;

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

}  // namespace epochrun
