// `epochrun run`: parse and validate every option before MPI starts or any file is written,
// then run the job on every rank.
#include <iostream>

#include "command_line.hpp"
#include "epochrun/epochrun.hpp"
#include "fault_injection.hpp"
#include "preemption_signals.hpp"
#include "run/run_options.hpp"

namespace epochrun::cli {
namespace {

// The whole of `run` once the communicator is known: the program's and an embedding program's.
CommandLineRun run_on(int argc, char** argv, Workspace& workspace,
                      const std::function<Communicator()>& communicator) {
  const auto program_start = std::chrono::steady_clock::now();  // --time-budget counts from here
  std::optional<Invocation> invocation;
  try {
    invocation = parse_run_options(argc, argv);
  } catch (const std::exception& error) {
    return {report_failure(error), {}};
  }
  if (!invocation) {
    // Taken out of the arguments by run_main before the options above were parsed.
    std::cout << "  --job-library FILE    load jobs from this shared library (repeatable; command "
                 "line only)\n";
    return {exit_status(ExitCode::kSuccess), {}};
  }
  invocation->run_options.program_start = program_start;

  // The test switch's start-up point: the preemption signals caught, MPI not started yet.
  try {
    arm_fault_points(launcher_rank());
  } catch (const std::exception& error) {
    return {report_failure(error), {}};
  }
  fault_point("start-up", 0);
  const auto comm = communicator();
  configure_logging(comm.rank(), invocation->log_level);
  try {
    JobRunner runner(invocation->make_job(), comm, invocation->run_options);
    auto summary = runner.run(workspace);
    if (comm.is_root() && !invocation->general.summary_json.empty()) {
      write_summary_json(summary, invocation->general.summary_json);
    }
    if (summary.upload_error) {
      print_error("upload failed: " + *summary.upload_error);
    }
    const int exit_code = summary.exit_code;
    return {exit_code, std::move(summary)};
  } catch (const std::exception& error) {
    if (comm.is_root()) {
      print_error(error.what());
    }
    return {exit_status(exit_code_for(error)), {}};
  }
}

}  // namespace

int run_command(int argc, char** argv) {
  // Started once the options are known to be good, ended after everything else here.
  std::optional<MpiSession> mpi;
  Workspace workspace;
  return run_on(argc, argv, workspace,
                [&] {
                  mpi.emplace(argc, argv);
                  return Communicator::world();
                })
      .exit_code;
}

}  // namespace epochrun::cli

namespace epochrun {

CommandLineRun run_from_command_line(int argc, char** argv, Workspace& workspace,
                                     const std::function<Communicator()>& communicator) {
  // As run_main's first line for `run`: a preemption signal that comes while the run starts
  // stops it at its first chance instead of ending the process (docs/PREEMPTION.md).
  catch_preemption_signals_at_start_up();
  return cli::run_on(argc, argv, workspace, communicator);
}

}  // namespace epochrun
