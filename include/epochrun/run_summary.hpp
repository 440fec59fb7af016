// What a run reports: returned by JobRunner::run and written by `--summary-json`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/export.hpp"
#include "epochrun/run_history.hpp"
#include "epochrun/stop_decision.hpp"
#include "epochrun/task.hpp"

namespace epochrun {

struct FailedSave {
  std::int64_t epoch = 0;
  std::string error;
};

// A job option whose value differs from the one recorded in the resumed checkpoint.
struct ConfigChange {
  std::string key;       // "sgd_regression.learning_rate"
  std::string old_json;  // the values as JSON text: 0.1, "adam", null (unset)
  std::string new_json;
};

// The saves that reached one level (--local-dir: node-local or flushed), as this rank timed them.
struct SaveLevelTimes {
  std::int64_t saves = 0;      // that ended at this level, failed ones left out
  double seconds = 0;          // each whole save, from its start to its commit
  double blocked_seconds = 0;  // of those, the job's thread stopped (an asynchronous save's less)
  double redundancy_seconds = 0;  // node-local: the exchanges across hosts (--local-redundancy)
  // Of redundancy_seconds, those of exchanges beside the job (--async-checkpoint): in no
  // save's seconds.
  double background_redundancy_seconds = 0;
};

struct RunSummary {
  std::string job;
  int num_ranks = 0;
  std::optional<std::int64_t> resumed_from;  // nullopt: started from scratch
  // The rank count that wrote the resumed checkpoint (when resumed).
  std::optional<std::int64_t> resumed_from_ranks;
  std::int64_t last_epoch = 0;  // the reference's return value
  std::int64_t epochs_run = 0;  // epochs executed by this run
  StopKind stop_kind = StopKind::kContinue;
  std::string stop_reason;
  // Where the resumed epoch's values were read: "flushed" (its checkpoint file) or "node-local"
  // (the ranks' node-local copies, --local-dir: of an epoch never flushed, or of a flushed one
  // whose copies were still there, each verified against its file).
  std::optional<std::string> resumed_from_level;
  // When a newer node-local epoch could not be recovered: which, why, and what it cost
  // ("epoch 17 not recoverable: ...; resuming from flushed epoch 15, 2 epochs lost").
  std::optional<std::string> resume_note;
  // When a node-local epoch was resumed with some parts rebuilt or moved across hosts
  // (--local-redundancy): where each host's parts came from ("host1: 2 parts node-local; host2:
  // 2 parts from the partner copy on host3").
  std::optional<std::string> resumed_parts;
  std::vector<std::int64_t> committed;  // epochs this run committed (flushed), in order
  // Epochs this run saved node-local only (--flush-every, --flush-interval), in order.
  std::vector<std::int64_t> saved_node_local;
  std::vector<FailedSave> failed_saves;
  // This rank's time in saves (rank 0's in the summary file), by the level each reached.
  SaveLevelTimes node_local_saves;
  SaveLevelTimes flushed_saves;
  std::vector<FailedSave> skipped_corrupt;  // `latest` passed over these damaged epochs
  std::vector<std::int64_t> deleted;        // by the retention policy or on success
  std::optional<std::string> uploaded_to;
  std::optional<std::string> upload_error;
  std::filesystem::path checkpoint_dir;
  // The newest committed checkpoint in the directory at the end: where a requeued run with
  // --resume-from-epoch latest continues. nullopt when there is none.
  std::optional<std::int64_t> last_committed_epoch;
  int exit_code = 0;               // what the program returns (ExitCode)
  std::int64_t restart_count = 0;  // SLURM_RESTART_COUNT, 0 outside SLURM
  std::optional<std::string> slurm_job_id;
  std::vector<ConfigChange> config_changes;  // rank 0, when resumed
  // Rank 0: the checkpoint directory's run history (docs/PREEMPTION.md), this run's record last.
  std::vector<RunRecord> history;
  double seconds = 0;
  GatheredBlobs outputs;  // rank 0: each node's declared outputs
};

// Written atomically (temporary file, fsync, rename).
EPOCHRUN_API void write_summary_json(const RunSummary& summary, const std::filesystem::path& file);

}  // namespace epochrun
