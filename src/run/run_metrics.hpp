// The run's figures as JSON lines in <checkpoint dir>/metrics.jsonl (README "Metrics"): per
// epoch, per load, per asynchronous save completion and per background redundancy exchange, every
// rank's figures gathered to rank 0, which appends one line per event. Without a checkpoint
// directory nothing is kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "array_path.hpp"
#include "epochrun/communicator.hpp"
#include "save_phases.hpp"

namespace epochrun {

struct SaveOutcome;

inline constexpr const char* kMetricsFileName = "metrics.jsonl";

// One rank's figures for an epoch; absent ones are left out of the line.
struct EpochFigures {
  double epoch_seconds = 0;                 // the epoch group (init's for epoch 0)
  std::optional<double> blocked_seconds;    // the job's thread stopped by this epoch's checkpoint
  std::optional<double> save_seconds;       // the save, when it completed within this epoch
  std::optional<std::uint64_t> save_bytes;  // this rank's bytes in that save
  std::optional<SavePhases> save_phases;    // where that save's time went
  // The path each global array of that save took (the same on every rank).
  std::vector<std::pair<std::string, ArrayPath>> array_paths;
  // Where that save went (the same on every rank): "flushed" to the checkpoint directory,
  // "node-local" only (--flush-every), or empty when this line has no save that ended.
  std::string save_level;
};

// The level a save reached, as the metrics lines name it.
const char* save_level_name(const SaveOutcome& save);

class RunMetrics {
 public:
  RunMetrics(const Communicator& comm, std::filesystem::path checkpoint_dir,
             std::chrono::system_clock::time_point run_started);

  // Collective. Each appends one line (rank 0); a line that cannot be written is a warning.
  void epoch(std::int64_t epoch, const EpochFigures& figures) const;
  void load(std::int64_t epoch, double seconds, std::uint64_t bytes) const;
  // A save that is not part of an epoch line: the end of an asynchronous one (after its
  // epoch's line; blocked_seconds is the job's wait for that end), or the one a stop between
  // epochs makes.
  void save(const SaveOutcome& save) const;
  // A node-local epoch's redundancy exchange that ran in the background (--async-checkpoint
  // with --local-redundancy) and settled: this rank's seconds in it.
  void redundancy(std::int64_t epoch, double seconds) const;

 private:
  struct Figures;
  void append(const std::string& event, std::int64_t epoch, const Figures& mine,
              const std::optional<bool>& committed,
              const std::vector<std::pair<std::string, ArrayPath>>& array_paths = {},
              const std::string& level = {}) const;
  // Rank 0: logs `error` as the metrics' first failure; later ones are not logged.
  void not_recorded(const std::exception& error) const;

  const Communicator& comm_;
  std::filesystem::path file_;  // empty: no metrics
  std::string run_started_;
  mutable bool warned_ = false;  // rank 0: a failure to append is logged once
};

}  // namespace epochrun
