// Parsing and validating the options of `epochrun run`: the command line over the INI file.
// Separate from running the job so that the fuzzer exercises exactly what the program runs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/job_registry.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/logging.hpp"
#include "preemption_signals.hpp"

namespace epochrun::cli {

struct GeneralOptions {
  std::string job;
  std::string config;
  std::string checkpoint_dir = "checkpoints";
  bool no_checkpoints = false;
  bool async_checkpoint = false;
  std::uint64_t async_max_staging_mib = 0;
  std::string local_dir;
  std::int64_t flush_every = 1;
  double flush_interval = 0;
  std::int64_t local_keep = 1;
  std::string local_redundancy = "none";
  std::string xdmf;
  std::string resume;
  std::int64_t num_epochs = 0;
  std::string upload_dir;
  std::string summary_json;
  std::string log_level = "info";
  std::int64_t keep_last = 0;
  std::int64_t keep_every = 0;
  bool delete_on_success = false;
  double task_failure_timeout = 60;
  std::string preempt_signals = kDefaultPreemptSignals;
  std::string checkpoint_every = "1";  // N, or auto (with mtbf)
  double mtbf = 0;                     // hours
  double checkpoint_interval = 0;
  std::vector<std::string> allow_config_change;
  double time_budget = 0;
  double time_margin = 0;
  double save_timeout = 600;
  std::string array_io = "auto";
  std::vector<std::string> mpi_io_hints;  // KEY=VALUE
  bool check_replicated = false;
};

// Everything `run` needs, validated.
struct Invocation {
  GeneralOptions general;
  // The job's declared options (bound to variables that make_job owns) and its factory.
  JobOptions job_options;
  JobFactory make_job;
  RunOptions run_options;
  LogLevel log_level = LogLevel::kInfo;
};

// Parses `epochrun run ...` (argv[0] is "run"). Returns nullopt when it printed help. Throws
// UsageError or a Boost.Program_options error for bad input; writes no file and needs no MPI.
std::optional<Invocation> parse_run_options(int argc, char** argv);

}  // namespace epochrun::cli
