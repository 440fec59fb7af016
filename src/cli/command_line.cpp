#include "command_line.hpp"

#include <mpi.h>

#include <boost/program_options/errors.hpp>
#include <cstdlib>
#include <iostream>

#include "epochrun/errors.hpp"
#include "epochrun/mpi_session.hpp"

namespace epochrun::cli {

int launcher_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) {
      return std::atoi(value);
    }
  }
  return 0;
}

void print_error(const std::string& message) {
  if (launcher_rank() != 0) {
    return;
  }
  std::string line = message;
  for (auto& c : line) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  std::cerr << "epochrun: error: " << line << std::endl;
}

namespace {

// True when a launcher started this process as one of several ranks of one job. The size
// variables are set only for the launched processes themselves (not, for example, for the
// batch script of an `sbatch --ntasks=3` job), so a plain `epochrun run ...` never starts MPI
// just to report a typo.
bool launched_as_one_of_several_ranks() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (const char* value = std::getenv(variable)) {
      return std::atoi(value) > 1;
    }
  }
  return false;
}

}  // namespace

int fail_before_mpi(const std::string& message, ExitCode exit_code) {
  print_error(message);  // flushed before the barrier, so the launcher already holds it
  if (launched_as_one_of_several_ranks() && !MpiSession::is_initialized()) {
    int argc = 0;
    char** argv = nullptr;
    MpiSession meeting(argc, argv);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  return exit_status(exit_code);
}

int report_failure(const std::exception& error) {
  const bool option_error = dynamic_cast<const boost::program_options::error*>(&error) != nullptr;
  return fail_before_mpi(error.what(), option_error ? ExitCode::kUsageError : exit_code_for(error));
}

std::vector<std::string> take_job_library_options(int& argc, char** argv) {
  const std::string flag = "--job-library";
  std::vector<std::string> files;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == flag) {
      if (i + 1 == argc) {
        throw UsageError(flag + " needs a FILE (a shared library of jobs)");
      }
      files.emplace_back(argv[++i]);
    } else if (argument.rfind(flag + "=", 0) == 0) {
      files.push_back(argument.substr(flag.size() + 1));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return files;
}

}  // namespace epochrun::cli
