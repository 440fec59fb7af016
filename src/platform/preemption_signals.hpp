// Preemption signals (SIGUSR1, SIGTERM, ...): a handler that only records the signal, read by
// the runner at its stop decision. Internal to the library.
//
// The handler sets one sig_atomic_t and nothing else, so it is safe whatever the rank was doing
// (inside MPI, HDF5 or malloc). Once installed it stays for the life of the process: a
// preemption signal is a request to stop after a checkpoint, and the same request made again
// changes nothing -- whoever makes it (a rank of a multi-node SLURM job gets `scancel --full`'s
// signal from slurmstepd and from the batch shell passing it on; SLURM ending the job sends
// SIGTERM to ranks that may be saving) and whenever it comes, the process's exit included: a
// launcher that sees one rank exit 75 terminates the others (srun --kill-on-bad-exit, mpirun),
// and a rank of another node may not have exited yet. A rank that must end at once gets SIGKILL
// (SLURM sends it KillWait seconds after its SIGTERM, mpirun a second after its own), or a
// signal that is not a preemption signal.
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
  // Clears the record and installs the flag-only handler for each of `signals`, for the rest
  // of the process (see above); a signal an earlier run caught and `signals` does not list gets
  // its disposition from before that run back.
  explicit PreemptionSignals(const std::vector<int>& signals);
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The first preemption signal this process received, 0 when none.
  static int received();
};

}  // namespace epochrun
