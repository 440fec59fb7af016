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
//
// A preemption signal can also come while the process is starting (SLURM's time-limit warning
// comes up to a minute early; `scancel --signal` at any moment): `epochrun run` therefore
// catches the default preemption signals as the first thing it does, before option parsing
// and MPI_Init (Open MPI's and PMIx's start-up leave the handlers in place), and the run keeps
// what was caught then as its own request: it stops at its first stop decision (before its
// first epoch, after init or the load), with a checkpoint and exit 75. Nothing a launcher does
// can close the window before that: slurmstepd and Open MPI's orted start every rank with the
// default dispositions and an empty signal mask, whatever their parent blocked or ignored, so
// slurm/epochrun.sbatch holds a signal until the ranks say they catch it (EPOCHRUN_READY_FILE).
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace epochrun {

// What --preempt-signals lists unless told otherwise; also what a run catches from the start of
// the process, before it has read that option.
inline constexpr const char* kDefaultPreemptSignals = "USR1,TERM";

// "USR1,TERM" -> {SIGUSR1, SIGTERM}; "none" -> {}. Names without the SIG prefix; throws
// UsageError naming an unknown one.
std::vector<int> parse_preemption_signals(const std::string& text);
// "SIGUSR1".
std::string signal_name(int signal);

// Installs the flag-only handler for kDefaultPreemptSignals at once, for a process that is about
// to run a job but has not read its options or started MPI yet; the first run (below) takes
// over what it caught.
void catch_preemption_signals_at_start_up();

class PreemptionSignals {
 public:
  // Installs the flag-only handler for each of `signals`, for the rest of the process (see
  // above); a signal an earlier run, or the start-up catch, caught and `signals` does not list
  // gets its disposition from before back. Clears the record of an earlier run; but a signal
  // caught since catch_preemption_signals_at_start_up() is this (first) run's request when
  // `signals` lists it, and is raised again under its old disposition when not (a SIGTERM
  // during the start of a run with `--preempt-signals USR1` ends the process, as it would have
  // without the start-up catch).
  explicit PreemptionSignals(const std::vector<int>& signals);
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  // The first preemption signal this process received, 0 when none.
  static int received();
};

}  // namespace epochrun
