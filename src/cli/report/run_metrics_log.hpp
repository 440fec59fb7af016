// Reading `<checkpoint-dir>/metrics.jsonl`, the per-epoch, per-rank figures every run appends
// (one JSON object a line, written by rank 0 with every rank's figures): grouped by run, in order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace epochrun::cli {

// One rank's figures for one event; a figure the line does not carry is absent.
struct RankFigures {
  int rank = 0;
  std::optional<double> epoch_seconds;    // the epoch's work
  std::optional<double> blocked_seconds;  // the job's thread stopped by the checkpoint
  std::optional<double> save_seconds;
  std::optional<std::uint64_t> save_bytes;
  std::optional<double> load_seconds;
  std::optional<std::uint64_t> load_bytes;
  std::optional<std::uint64_t> peak_rss_bytes;
};

struct LoggedEpoch {
  std::int64_t epoch = 0;
  std::vector<RankFigures> ranks;  // by rank
  std::optional<bool> committed;   // known once the save has ended
};

struct LoggedRun {
  std::string started;              // "run_started": the run's ISO 8601 start
  std::optional<LoggedEpoch> load;  // the resume's load, when the run resumed
  std::vector<LoggedEpoch> epochs;  // in the order they ran
  int num_ranks() const;
};

struct MetricsLog {
  std::vector<LoggedRun> runs;
  int damaged_lines = 0;  // lines before the last that are not a metrics object: skipped
};

// Reads the log. A last line that is not a complete JSON object (a run killed while it was
// appending) is skipped silently; any other line that is not one is counted in damaged_lines.
// Fields it does not know are ignored. A missing or unreadable file is a UsageError.
MetricsLog read_metrics_log(const std::filesystem::path& file);

}  // namespace epochrun::cli
