// Pieces shared by the epochrun subcommands.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "epochrun/errors.hpp"

namespace epochrun::cli {

// The process exit status of `code`: what main and the subcommands return.
constexpr int exit_status(ExitCode code) {
  return static_cast<int>(code);
}

// The rank the launcher gave this process (mpirun, srun, or none: 0), known before MPI_Init,
// so that a usage error is printed once per job, not once per rank.
int launcher_rank();

// Prints "epochrun: error: <message>" as one line on stderr (on the first rank only).
void print_error(const std::string& message);

// For a failure found before MPI starts: prints it (first rank only) and returns
// `exit_code` once every rank of the launch has got this far. Under mpirun or srun each rank
// parses the same arguments and fails the same way; without this meeting, a rank that exits
// first makes the launcher kill the others, sometimes before rank 0 has written its line,
// and the user sees only the launcher's "exited with non-zero status" banner.
int fail_before_mpi(const std::string& message, ExitCode exit_code);

// fail_before_mpi for an exception of option parsing or validation: Boost's option errors
// are usage errors, an epochrun error exits with its class's code (exit_code_for).
int report_failure(const std::exception& error);

// Removes every `--job-library FILE` and `--job-library=FILE` from argv[1..argc) (argc shrinks)
// and returns the files in their order. UsageError when FILE is missing.
std::vector<std::string> take_job_library_options(int& argc, char** argv);

int run_command(int argc, char** argv);
int inspect_command(int argc, char** argv);
int list_jobs_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int report_command(int argc, char** argv);

}  // namespace epochrun::cli
