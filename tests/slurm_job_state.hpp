// What the SLURM tests read of a job: its state as `scontrol -o show job` prints it, and whether
// a slurmstepd of it still runs on this machine. Header-only, shared by slurm_test.cpp and
// multihost_test.cpp.
#pragma once

#include <cctype>
#include <filesystem>
#include <regex>
#include <string>

#include "test_support.hpp"

namespace epochrun::testing {

struct SlurmJobState {
  std::string state;  // PENDING, RUNNING, COMPLETED, ...
  std::string reason;
  int restarts = -1;
};

// The state, reason and restart count in the output of `scontrol -o show job ID`.
inline SlurmJobState parse_slurm_job_state(const std::string& scontrol_output) {
  SlurmJobState state;
  std::smatch match;
  if (std::regex_search(scontrol_output, match, std::regex("JobState=(\\S+)"))) {
    state.state = match[1];
  }
  if (std::regex_search(scontrol_output, match, std::regex("Reason=(\\S+)"))) {
    state.reason = match[1];
  }
  if (std::regex_search(scontrol_output, match, std::regex("Restarts=([0-9]+)"))) {
    state.restarts = std::stoi(match[1]);
  }
  return state;
}

// How many runs of the batch script printed their first line ("epochrun.sbatch: job ..."), in
// its output (append mode: every run's).
inline int runs_started(const std::string& output) {
  int runs = 0;
  for (auto at = output.find("epochrun.sbatch: job"); at != std::string::npos;
       at = output.find("epochrun.sbatch: job", at + 1)) {
    ++runs;
  }
  return runs;
}

// Whether a one-minute limit's warning killed the batch shell before its first line. slurmctld
// sends the warning at one of its checks, up to a minute early; once it came at the run's very
// start, the shell died of it (slurmd.log: "died by signal: 10") and the job ended FAILED,
// JobLaunchFailure, with nothing of the script run. No trap can be set sooner, and a real limit
// of hours cannot warn that early: the time-limit cases requeue such a job, as an operator
// would, at most twice.
inline bool killed_by_an_early_warning(const SlurmJobState& state, const std::string& output) {
  return state.state == "FAILED" && state.reason == "JobLaunchFailure" &&
         runs_started(output) <= state.restarts;
}

// Whether a slurmstepd of job `id` ("slurmstepd: [ID.batch]", "[ID.0]") still runs here (on any
// host of tests/clusters/multihost: they share one PID space). A requeued job let start again while
// its previous run's batch step was still ending was marked COMPLETED by that old step's exit
// (seen once, after its ranks had died of a signal).
inline bool has_slurm_step_processes(const std::string& id) {
  const std::string prefix = "slurmstepd: [" + id + ".";
  for (const auto& entry : list_directory("/proc")) {
    if (!entry.empty() && std::isdigit(static_cast<unsigned char>(entry[0])) &&
        read_file(std::filesystem::path("/proc") / entry / "cmdline").rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace epochrun::testing
