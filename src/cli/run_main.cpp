// epochrun::run_main: the whole epochrun command line -- run checkpointed epoch jobs over MPI,
// and inspect their checkpoints -- for the epochrun program and for users' own programs.
#include "epochrun/run_main.hpp"

#include <filesystem>
#include <iostream>
#include <string>

#include "command_line.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_registry.hpp"
#include "job_library.hpp"

namespace {

constexpr const char* kUsage = R"(usage: {program} <command> [options]

commands:
  run        run a job (mpirun -np N {program} run --job NAME ...); see '{program} run --help'
  inspect    a checkpoint directory or file: summary, blobs, values, diff, .npy export, verify;
             see '{program} inspect --help'
  list-jobs  list the jobs this program can run
  bench      time checkpoint save and load against plain POSIX I/O (mpirun -np R {program} bench)
  report     draw the timeline of DIR/metrics.jsonl as SVG; see '{program} report --help'

run and list-jobs also take --job-library FILE (repeatable): load more jobs from a shared
library built against epochrun (see <epochrun/job_library.hpp>).

exit codes: 0 success, 1 job failed, 2 usage or config error, 3 checkpoint error,
            4 finished but the upload failed, 75 stopped early (preemption signal, time
            limit): run again with --resume-from-epoch latest
)";

std::string usage(const std::string& program) {
  std::string text = kUsage;
  const std::string placeholder = "{program}";
  for (auto at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder)) {
    text.replace(at, placeholder.size(), program);
  }
  return text;
}

// Loads the --job-library files of `run` or `list-jobs` and takes them out of its arguments.
void load_job_libraries(int& argc, char** argv) {
  for (const auto& file : epochrun::cli::take_job_library_options(argc, argv)) {
    epochrun::load_job_library(file, epochrun::JobRegistry::instance());
  }
}

}  // namespace

namespace epochrun {

int run_main(int argc, char** argv) {
  const std::string program =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "epochrun";
  if (argc < 2) {
    return cli::fail_before_mpi(
        "missing command (run, inspect, list-jobs, bench or report); see '" + program + " --help'",
        static_cast<int>(ExitCode::kUsageError));
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << usage(program);
    return 0;
  }
  if (command == "--version") {
    std::cout << "epochrun " EPOCHRUN_VERSION "\n";
    return 0;
  }
  int command_argc = argc - 1;
  char** command_argv = argv + 1;
  if (command == "run" || command == "list-jobs") {
    try {
      load_job_libraries(command_argc, command_argv);
    } catch (const std::exception& error) {
      return cli::report_failure(error);
    }
  }
  if (command == "run") {
    return cli::run_command(command_argc, command_argv);
  }
  if (command == "inspect") {
    return cli::inspect_command(command_argc, command_argv);
  }
  if (command == "bench") {
    return cli::bench_command(command_argc, command_argv);
  }
  if (command == "report") {
    return cli::report_command(command_argc, command_argv);
  }
  if (command == "list-jobs") {
    return cli::list_jobs_command(command_argc, command_argv);
  }
  return cli::fail_before_mpi(
      "unknown command '" + command + "' (run, inspect, list-jobs, bench or report)",
      static_cast<int>(ExitCode::kUsageError));
}

}  // namespace epochrun
