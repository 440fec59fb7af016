#include "command_line.hpp"

#include <mpi.h>

#include <boost/program_options/errors.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "epochrun/errors.hpp"
#include "epochrun/mpi_session.hpp"
#include "polite_wait.hpp"

namespace epochrun::cli {

int launcher_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) {
      return std::atoi(value);
    }
  }
  return 0;
}

namespace {

void print_error_line(const std::string& message) {
  std::string line = message;
  for (auto& c : line) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  std::cerr << "epochrun: error: " << line << std::endl;
}

// How long a rank that failed before the run waits for the others to fail alike. They parse
// the same arguments in the same way and meet within moments; this bounds the wait of a rank
// that failed alone.
constexpr std::chrono::seconds kMeetingWait{20};

// Whether every rank of MPI_COMM_WORLD reaches this barrier within kMeetingWait.
bool every_rank_meets() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  const auto deadline = std::chrono::steady_clock::now() + kMeetingWait;
  return wait_politely(request, [&] { return std::chrono::steady_clock::now() >= deadline; });
}

}  // namespace

void print_error(const std::string& message) {
  if (launcher_rank() == 0) {
    print_error_line(message);
  }
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
    // A rank that failed alone (its working directory gone on its node, a file only it cannot
    // read) meets nobody: the others went on into the run, where they would wait for it in
    // their first collective call. It says so and ends them all.
    if (!every_rank_meets()) {
      if (launcher_rank() != 0) {
        print_error_line(message);
      }
      print_error_line("rank " + std::to_string(launcher_rank()) +
                       " failed before the run while the other ranks went on: ending every rank");
      MPI_Abort(MPI_COMM_WORLD, exit_status(exit_code));
    }
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
