// A run's record in the run history of a checkpoint directory: one JSON line per run in
// <dir>/runs.jsonl, appended at the run's end (start and end time, host, ranks, SLURM job and
// restart count, where it resumed from, why it stopped, how far it committed, its exit code).
// A run killed outright leaves no line. RunSummary::history holds the directory's records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace epochrun {

// One line of runs.jsonl; each member is the JSON field of the same name.
struct RunRecord {
  std::string started_at;  // UTC, "2026-11-23T12:10:00Z"
  std::string ended_at;
  std::string host;
  int ranks = 0;
  std::optional<std::string> slurm_job_id;
  std::int64_t restart_count = 0;
  std::optional<std::int64_t> resumed_from;        // nullopt: started from scratch
  std::optional<std::int64_t> resumed_from_ranks;  // the rank count that wrote it
  std::optional<std::string> resumed_from_level;   // read from: "flushed" or "node-local"
  std::optional<std::string> resume_note;          // a node-local epoch that was lost, and why
  std::optional<std::string> resumed_parts;        // where each host's node-local parts came from
  std::string stop_kind;                           // stop_kind_name()
  std::string stop_reason;
  std::int64_t epochs_run = 0;
  std::optional<std::int64_t> last_committed_epoch;
  int exit_code = 0;

  bool operator==(const RunRecord&) const = default;
};

}  // namespace epochrun
