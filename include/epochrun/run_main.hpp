// Your own program with the whole epochrun command line over the jobs it registered:
//
//   int main(int argc, char** argv) {
//     register_my_jobs(epochrun::JobRegistry::instance());
//     return epochrun::run_main(argc, argv);
//   }
//
// `./myprog run --job NAME ...`, `list-jobs`, `inspect`, `bench`: the same options, config
// files, summary and exit codes (README "Exit codes") as the epochrun program, which is this
// very call over the jobs in epochrun's jobs/.
#pragma once

#include <functional>
#include <optional>

#include "epochrun/communicator.hpp"
#include "epochrun/export.hpp"
#include "epochrun/run_summary.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// Runs the command in argv[1] and returns the process exit code. Starts and ends MPI itself
// (call it before MPI_Init, at most once per process).
EPOCHRUN_API int run_main(int argc, char** argv);

// What run_from_command_line returns.
struct CommandLineRun {
  int exit_code = 0;  // what `epochrun run` would exit with (README "Exit codes")
  // This rank's summary, when the run got to its end (finished or stopped early: exit 0, 4 or
  // 75); unset when it failed, or printed its help.
  std::optional<RunSummary> summary;
};

// `epochrun run` for a program that runs jobs from its own code and may own MPI itself (an
// interpreter's bindings, such as epochrun's Python package, or a program that uses MPI
// before and after): argv[0] is "run", the rest are run's options, parsed and checked exactly
// as the program does (a --config file, --summary-json, the exit codes, the errors printed as
// one line by the first rank). Every option is checked before `communicator` is called, so
// that a mistake is reported before MPI starts when the caller starts it there; it returns the
// communicator the job runs on (MPI at MPI_THREAD_FUNNELED or above for the asynchronous
// saves). The job's blobs live in `workspace`, which the caller keeps after the run. Catches
// the default preemption signals from its first line, as run_main does; neither starts nor
// ends MPI itself. Call it on every rank of the communicator.
EPOCHRUN_API CommandLineRun run_from_command_line(
    int argc, char** argv, Workspace& workspace, const std::function<Communicator()>& communicator);

}  // namespace epochrun
