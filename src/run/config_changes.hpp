// How this run's configuration differs from the one recorded in the checkpoint it resumes.
// Internal to the library.
#pragma once

#include <string>
#include <vector>

#include "epochrun/job.hpp"
#include "epochrun/run_summary.hpp"

namespace epochrun {

// The job's options ("<job>.<key>") whose values differ between the stored and the current
// configuration (JSON objects as recorded in checkpoints), sorted by key. The run's generic
// options (directories, resume, log level, signals, time limits) may change freely and are
// not compared. A key missing on one side is null there.
std::vector<ConfigChange> job_config_changes(const std::string& job_name,
                                             const std::string& stored_json,
                                             const std::string& current_json);

// Throws CheckpointMismatch naming the first change of an option that defines the run
// (Job::run_defining_options) unless it is in `allowed` (--allow-config-change).
void refuse_run_defining_changes(const Job& job, const std::vector<ConfigChange>& changes,
                                 const std::vector<std::string>& allowed, std::int64_t epoch);

}  // namespace epochrun
