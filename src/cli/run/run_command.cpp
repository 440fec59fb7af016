// `epochrun run`: parse and validate every option before MPI starts or any file is written,
// then run the job on every rank.
#include <iostream>

#include "command_line.hpp"
#include "epochrun/epochrun.hpp"
#include "fault_injection.hpp"
#include "run/run_options.hpp"

namespace epochrun::cli {

int run_command(int argc, char** argv) {
  const auto program_start = std::chrono::steady_clock::now();  // --time-budget counts from here
  std::optional<Invocation> invocation;
  try {
    invocation = parse_run_options(argc, argv);
  } catch (const std::exception& error) {
    return report_failure(error);
  }
  if (!invocation) {
    // Taken out of the arguments by run_main before the options above were parsed.
    std::cout << "  --job-library FILE    load jobs from this shared library (repeatable; command "
                 "line only)\n";
    return exit_status(ExitCode::kSuccess);
  }
  invocation->run_options.program_start = program_start;

  // The test switch's start-up point: the preemption signals caught, MPI not started yet.
  try {
    arm_fault_points(launcher_rank());
  } catch (const std::exception& error) {
    return report_failure(error);
  }
  fault_point("start-up", 0);
  MpiSession mpi(argc, argv);
  const auto world = Communicator::world();
  configure_logging(world.rank(), invocation->log_level);
  try {
    Workspace workspace;
    JobRunner runner(invocation->make_job(), world, invocation->run_options);
    const auto summary = runner.run(workspace);
    if (world.is_root() && !invocation->general.summary_json.empty()) {
      write_summary_json(summary, invocation->general.summary_json);
    }
    if (summary.upload_error) {
      print_error("upload failed: " + *summary.upload_error);
    }
    return summary.exit_code;
  } catch (const std::exception& error) {
    if (world.is_root()) {
      print_error(error.what());
    }
    return exit_status(exit_code_for(error));
  }
}

}  // namespace epochrun::cli
