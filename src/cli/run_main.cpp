// epochrun::run_main: the whole epochrun command line -- run checkpointed epoch jobs over MPI,
// and inspect their checkpoints -- for the epochrun program and for users' own programs.
#include "epochrun/run_main.hpp"

#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

#include "command_line.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_registry.hpp"
#include "error_table.hpp"
#include "job_library.hpp"
#include "preemption_signals.hpp"

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

)";

// "exit codes: 0 success, 1 job failed, ...", from the table the program's exits follow,
// wrapped at kWidth columns; a code stays on the line of its meaning's first word.
std::string exit_codes_text() {
  constexpr std::size_t kWidth = 88;
  const std::string indent(12, ' ');
  std::string text;
  std::string line = "exit codes:";
  const auto add = [&](const std::string& word) {
    if (line.size() + 1 + word.size() > kWidth) {
      text += line + "\n";
      line = indent + word;
    } else {
      line += " " + word;
    }
  };
  for (const auto& [code, meaning] : epochrun::kExitCodeMeanings) {
    std::istringstream words{std::string(meaning)};
    std::string word;
    words >> word;
    std::string next = std::to_string(static_cast<int>(code)) + " " + word;
    while (words >> word) {
      add(next);
      next = word;
    }
    add(next + (code == std::end(epochrun::kExitCodeMeanings)[-1].code ? "" : ","));
  }
  return text + line + "\n";
}

std::string usage(const std::string& program) {
  std::string text = kUsage + exit_codes_text();
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
  // First of all: a preemption signal that comes while a run starts (SLURM's warning can come
  // that early) is caught from here on and stops the run at its first chance, rather than
  // ending this rank with the signal's default action (docs/PREEMPTION.md). Only for `run`: the
  // other commands end on SIGTERM as any program does.
  if (argc >= 2 && std::string_view(argv[1]) == "run") {
    catch_preemption_signals_at_start_up();
  }
  const std::string program =
      argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "epochrun";
  if (argc < 2) {
    return cli::fail_before_mpi(
        "missing command (run, inspect, list-jobs, bench or report); see '" + program + " --help'",
        ExitCode::kUsageError);
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << usage(program);
    return cli::exit_status(ExitCode::kSuccess);
  }
  if (command == "--version") {
    std::cout << "epochrun " EPOCHRUN_VERSION "\n";
    return cli::exit_status(ExitCode::kSuccess);
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
      ExitCode::kUsageError);
}

}  // namespace epochrun
