// The resume decision and the load: which committed epoch a run starts from (rank 0 decides,
// every rank follows), loading it, falling back past corrupt ones for `latest`, and refusing a
// checkpoint that does not fit the job as it is now configured. With --local-dir the node-local
// epochs (their manifests) are candidates too: one that is not recoverable (a rank's copy
// missing or damaged, another rank count) is passed over for the next, and the fallback is said
// in one line ("epoch 17 not recoverable: ...; resuming from flushed epoch 15, 2 epochs lost"),
// kept in the summary and the run history.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/job.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/run_summary.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

class CheckpointIndex;

struct Resumed {
  std::int64_t epoch = 0;
  std::vector<std::string> blobs;  // the loaded blob names: what this run's checkpoints hold
  double seconds = 0;              // the load's
  std::uint64_t bytes = 0;         // this rank's loaded bytes
  std::int64_t written_by_ranks = 0;
  bool node_local = false;  // from a node-local epoch's copies (its manifest), not a flushed file
};

// Collective. `index` is rank 0's view of the directory (null elsewhere, and without a
// checkpoint directory). nullopt: start from scratch. Throws (on every rank) for an epoch that
// is not there or does not load, a run-defining configuration change, or blobs the job no
// longer declares so; records skipped corrupt epochs and configuration changes in `summary`.
std::optional<Resumed> resume(const Job& job, const Communicator& comm, const RunOptions& options,
                              const std::vector<std::string>& node_names,
                              const CheckpointIndex* index, Workspace& workspace,
                              RunSummary& summary);

}  // namespace epochrun
