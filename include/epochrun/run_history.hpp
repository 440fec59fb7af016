// The run history of a checkpoint directory: one JSON line per run in <dir>/runs.jsonl, appended
// at the run's end (start and end time, host, ranks, SLURM job and restart count, where it
// resumed from, why it stopped, how far it committed, its exit code). A run killed outright
// leaves no line.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace epochrun {

struct RunSummary;

inline constexpr const char* kRunHistoryFileName = "runs.jsonl";

// One line of runs.jsonl; each member is the JSON field of the same name.
struct RunRecord {
  std::string started_at;  // utc_timestamp()
  std::string ended_at;
  std::string host;
  int ranks = 0;
  std::optional<std::string> slurm_job_id;
  std::int64_t restart_count = 0;
  std::optional<std::int64_t> resumed_from;  // nullopt: started from scratch
  std::string stop_kind;                     // stop_kind_name()
  std::string stop_reason;
  std::int64_t epochs_run = 0;
  std::optional<std::int64_t> last_committed_epoch;
  int exit_code = 0;

  bool operator==(const RunRecord&) const = default;
};

// "2026-11-23T12:10:00Z".
std::string utc_timestamp(std::chrono::system_clock::time_point time);

// The record of a run that ended with `summary`.
RunRecord run_record(const RunSummary& summary, std::chrono::system_clock::time_point started,
                     std::chrono::system_clock::time_point ended);

// Appends `record` as one line and makes it durable (fsync; a new file's directory entry too).
// Throws Error.
void append_run_record(const std::filesystem::path& directory, const RunRecord& record);

// The records, oldest first; none when there is no history. A line that does not parse (a
// crash mid-append, a hand edit) is skipped; fields a newer epochrun added are ignored.
std::vector<RunRecord> read_run_history(const std::filesystem::path& directory);

}  // namespace epochrun
