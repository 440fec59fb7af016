// epochrun: run checkpointed epoch jobs over MPI, and inspect their checkpoints.
#include <iostream>
#include <string>

#include "cli/command_line.hpp"
#include "epochrun/errors.hpp"

namespace {

constexpr const char* kUsage = R"(usage: epochrun <command> [options]

commands:
  run        run a job (mpirun -np N epochrun run --job NAME ...); see 'epochrun run --help'
  inspect    a checkpoint directory or file: summary, blobs, values, diff, .npy export, verify;
             see 'epochrun inspect --help'
  list-jobs  list the jobs this program can run
  bench      time checkpoint save and load against plain POSIX I/O (mpirun -np R epochrun bench)
  report     draw the timeline of DIR/metrics.jsonl as SVG; see 'epochrun report --help'

exit codes: 0 success, 1 job failed, 2 usage or config error, 3 checkpoint error,
            4 finished but the upload failed, 75 stopped early (preemption signal, time
            limit): run again with --resume-from-epoch latest
)";

}  // namespace

int main(int argc, char** argv) {
  using epochrun::ExitCode;
  if (argc < 2) {
    return epochrun::cli::fail_before_mpi(
        "missing command (run, inspect, list-jobs or bench); see 'epochrun --help'",
        static_cast<int>(ExitCode::kUsageError));
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "epochrun 0.1.0\n";
    return 0;
  }
  if (command == "run") {
    return epochrun::cli::run_command(argc - 1, argv + 1);
  }
  if (command == "inspect") {
    return epochrun::cli::inspect_command(argc - 1, argv + 1);
  }
  if (command == "report") {
    return epochrun::cli::report_command(argc - 1, argv + 1);
  }
  if (command == "bench") {
    return epochrun::cli::bench_command(argc - 1, argv + 1);
  }
  if (command == "list-jobs") {
    return epochrun::cli::list_jobs_command(argc - 1, argv + 1);
  }
  return epochrun::cli::fail_before_mpi(
      "unknown command '" + command + "' (run, inspect, list-jobs or bench)",
      static_cast<int>(ExitCode::kUsageError));
}
