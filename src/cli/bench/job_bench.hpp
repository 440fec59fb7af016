// `epochrun bench --job NAME`: what a checkpoint costs inside a running job. The real job runs
// for the same epochs with synchronous checkpoints (global arrays by the default path and by
// collective MPI-IO), with asynchronous ones and with none, in rounds whose order alternates,
// beside the raw write of the same bytes (one file per rank, from memory the job already
// touched) plain, with writeback hints and with direct I/O; and the job's own
// metrics say where one save's time went, phase by phase (docs/benchmarks.md, "Inside a job").
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_measures.hpp"
#include "epochrun/communicator.hpp"
#include "run/run_options.hpp"

namespace epochrun::cli {

// The targets inside a job, per round: a synchronous save's cost against the raw write of its
// bytes, and the run with asynchronous checkpoints against the run with none.
inline constexpr double kJobSaveTarget = 1.11;
inline constexpr double kJobAsyncRunTarget = 1.10;

struct JobBenchOptions {
  std::string job;
  std::int64_t epochs = 3;
  std::vector<std::string> job_arguments;  // passed on to `run`: --<job>.<key> VALUE ...
};

// What `epochrun run --job NAME --num-epochs E --log-level warn --preempt-signals none`, then
// `extra`, then the job's options, would run: the program's own parser. UsageError for what it
// refuses.
Invocation job_invocation(const JobBenchOptions& options, std::vector<std::string> extra);

// UsageError for a job or job option `run` would refuse; needs no MPI and writes nothing.
void check_job_options(const JobBenchOptions& options);

// Collective. Throws Error when a save fails (the run did not pay for it). Rows (name against
// limit):
//   job_save              a synchronous save's cost in the job: (the run with checkpoints - the
//                         run without) / its saves, against job_write_limit (kJobSaveTarget)
//   job_save_vs_hinted_write  the same against job_write_limit_hinted (kSaveHintedTarget)
//   job_save_vs_direct_write  the same against job_write_limit_direct (kSaveHintedTarget): the
//                         raw write as a directly written save makes it
//   job_save_mpiio        the same cost with --array-io mpiio, against job_write_limit
//   job_save_seconds      the save as the job's metrics time it (the slowest rank's, median
//                         over the run's saves), against job_write_limit
//   job_async_run         the run with --async-checkpoint against job_no_checkpoints_run
//                         (kJobAsyncRunTarget)
//   job_sync_run          the run with synchronous checkpoints against job_no_checkpoints_run
//   job_sync_run_mpiio    the same with --array-io mpiio
// the limits themselves, and job_save_phases: each rank's median seconds per phase of a
// synchronous and of an asynchronous save, and its page faults per save.
nlohmann::json measure_job(const Communicator& comm, const std::filesystem::path& directory,
                           const JobBenchOptions& options, MeasureSettings& settings);

// The phase breakdown of job_save_phases, printed after the table.
void print_job_phases(const nlohmann::json& row);

}  // namespace epochrun::cli
