// The run history file of a checkpoint directory, <dir>/runs.jsonl: appending a run's record at
// its end and reading the records back (RunRecord, <epochrun/run_history.hpp>).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "epochrun/run_history.hpp"

namespace epochrun {

struct RunSummary;

inline constexpr const char* kRunHistoryFileName = "runs.jsonl";

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
