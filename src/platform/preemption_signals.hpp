// Preemption signals (SIGUSR1, SIGTERM, ...): a handler that only records the signal, read by
// the runner at its stop decision. Internal to the library.
//
// The handler sets one sig_atomic_t and nothing else, so it is safe whatever the rank was doing
// (inside MPI, HDF5 or malloc). It stays installed for the whole run: a preemption signal is a
// request to stop after a checkpoint, and the same request made again -- by the batch shell
// passing it on and by slurmstepd signalling the step directly, which a rank of a multi-node job
// both gets; by SLURM's SIGTERM when the job ends during the last save -- changes nothing. A
// rank that must end at once gets SIGKILL (SLURM sends it KillWait seconds after its SIGTERM,
// mpirun a second after its own), or a signal that is not a preemption signal.
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
  // Called by the runner at its decision to stop. A further preemption signal is recorded as
  // before (see above): there is nothing to change, and this goes with the runner's calls.
  void restore_defaults() const {}

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

}  // namespace epochrun
