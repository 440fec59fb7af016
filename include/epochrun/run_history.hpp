// The run history of a checkpoint directory: one JSON line per run in <dir>/runs.jsonl, appended
// at the run's end (start and end time, host, ranks, SLURM job and restart count, where it
// resumed from, why it stopped, how far it committed, its exit code). A run killed outright
// leaves no line.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "epochrun/run_summary.hpp"

namespace epochrun {

inline constexpr const char* kRunHistoryFileName = "runs.jsonl";

// "2026-11-23T12:10:00Z".
std::string utc_timestamp(std::chrono::system_clock::time_point time);

// The record of a run that ended with `summary`.
nlohmann::json run_record(const RunSummary& summary, std::chrono::system_clock::time_point started,
                          std::chrono::system_clock::time_point ended);

// Appends `record` as one line and makes it durable (fsync; a new file's directory entry too).
// Throws Error.
void append_run_record(const std::filesystem::path& directory, const nlohmann::json& record);

// The records, oldest first; none when there is no history. A line that does not parse (a
// crash mid-append, a hand edit) is skipped.
nlohmann::json read_run_history(const std::filesystem::path& directory);

}  // namespace epochrun
