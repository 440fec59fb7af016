// Pieces shared by the epochrun subcommands.
#pragma once

#include <string>

namespace epochrun::cli {

// The rank the launcher gave this process (mpirun, srun, or none: 0), known before MPI_Init,
// so that a usage error is printed once per job, not once per rank.
int launcher_rank();

// Prints "epochrun: error: <message>" as one line on stderr (on the first rank only).
void print_error(const std::string& message);

// Prints a failure of option parsing or validation and returns its exit code: Boost's
// option errors and UsageError are 2, checkpoint errors 3 (see errors.hpp).
int report_failure(const std::exception& error);

int run_command(int argc, char** argv);
int inspect_command(int argc, char** argv);
int list_jobs_command(int argc, char** argv);

}  // namespace epochrun::cli
