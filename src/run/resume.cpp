#include "resume.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "blob_plans.hpp"
#include "checkpoint_directory_admin.hpp"
#include "checkpoint_index.hpp"
#include "collective_errors.hpp"
#include "config_changes.hpp"
#include "epochrun/errors.hpp"
#include "seconds_since.hpp"

namespace epochrun {
namespace {

// The epochs to try, in order: none (from scratch), the explicit one, or every committed epoch
// newest first (`latest`).
std::vector<std::int64_t> candidates(const Communicator& comm, const RunOptions& options,
                                     const CheckpointIndex* index) {
  // Rank 0 looks at the directory and decides; everyone follows, so that ranks with different
  // views of a shared file system can never start from different epochs.
  std::vector<std::int64_t> epochs;
  run_on_root_then_agree(comm, "resume", [&] {
    const auto& request = options.resume;
    if (request.kind != ResumeRequest::Kind::kFromScratch && index == nullptr) {
      throw UsageError("resuming needs a checkpoint directory (--checkpoint-dir)");
    }
    if (request.kind == ResumeRequest::Kind::kEpoch) {
      const auto committed = index->epochs();
      if (!std::binary_search(committed.begin(), committed.end(), request.epoch)) {
        throw CheckpointNotFound(index->directory().describe_missing(request.epoch));
      }
      epochs.push_back(request.epoch);
    } else if (request.kind == ResumeRequest::Kind::kLatest) {
      epochs = index->epochs();
      std::reverse(epochs.begin(), epochs.end());  // newest first
    }
  });
  comm.broadcast(epochs);
  return epochs;
}

// CheckpointMismatch when a loaded blob is not what the job now declares.
void check_loaded_blobs(const Job& job, const Communicator& comm, const Workspace& workspace,
                        const std::filesystem::path& file) {
  run_then_agree(comm, "checkpoint " + file.string(), [&] {
    for (const auto& expected : job.expected_blobs()) {
      if (!workspace.has(expected.name)) {
        throw CheckpointMismatch("it has no blob '" + expected.name + "', which the job needs");
      }
      const auto& blob = workspace.get(expected.name);
      const auto shape = expected.local_shape(comm.rank(), comm.size());
      if (blob.dtype() != expected.dtype || blob.shape() != shape) {
        throw CheckpointMismatch(
            "blob '" + expected.name + "' is " + std::string(dtype_name(blob.dtype())) +
            shape_to_string(blob.shape()) + " there, but the job now expects " +
            std::string(dtype_name(expected.dtype)) + shape_to_string(shape) +
            " (was the configuration changed?)");
      }
    }
  });
}

// The per-node blobs a resume at another rank count creates anew (RankChange::recreate), as the
// init group would, added to what this run's checkpoints hold.
void recreate(const Job& job, const Communicator& comm, const std::vector<std::string>& names,
              Workspace& workspace, std::vector<std::string>& saved) {
  for (const auto& name : names) {
    workspace.put(name, job.find_blob(name)->created(comm.rank(), comm.size()));
    saved.push_back(name);
  }
}

// Rank 0 compares this run's configuration with the resumed checkpoint's: logs and records
// each change, and refuses (CheckpointMismatch, on every rank) a run-defining one.
void check_config_changes(const Job& job, const Communicator& comm, const RunOptions& options,
                          const std::string& checkpoint_config, std::int64_t epoch,
                          RunSummary& summary) {
  run_on_root_then_agree(comm, "resume", [&] {
    summary.config_changes = job_config_changes(job.name(), checkpoint_config, options.config_json);
    refuse_run_defining_changes(job, summary.config_changes, options.allowed_config_changes, epoch);
    for (const auto& change : summary.config_changes) {
      spdlog::info("configuration changed since the checkpoint of epoch {}: {} {} -> {} (applied)",
                   epoch, change.key, change.old_json, change.new_json);
    }
  });
}

}  // namespace

std::optional<Resumed> resume(const Job& job, const Communicator& comm, const RunOptions& options,
                              const std::vector<std::string>& node_names,
                              const CheckpointIndex* index, Workspace& workspace,
                              RunSummary& summary) {
  const CheckpointDirectory directory(options.checkpoint_dir);
  const auto epochs = candidates(comm, options, index);
  for (auto epoch : epochs) {
    const auto load_started = std::chrono::steady_clock::now();
    Resumed resumed;
    resumed.epoch = epoch;
    Loaded loaded;
    try {
      auto request = load_request(job, comm, epoch, node_names, options.mpi_io_hints);
      request.local_dir = options.local_dir;
      loaded = load_checkpoint(directory, comm, request, workspace, options.save_timeout);
    } catch (const CorruptCheckpoint& error) {
      // An explicit epoch must load or fail; `latest` falls back to the previous valid one.
      if (options.resume.kind != ResumeRequest::Kind::kLatest) {
        throw;
      }
      if (comm.is_root()) {
        spdlog::warn("skipping corrupt checkpoint of epoch {}: {}", epoch, error.what());
      }
      summary.skipped_corrupt.push_back(FailedSave{epoch, error.what()});
      continue;
    }
    resumed.seconds = seconds_since(load_started);
    resumed.bytes = workspace.byte_size();
    resumed.blobs = std::move(loaded.blobs);
    resumed.written_by_ranks = loaded.written_by_ranks;
    recreate(job, comm, loaded.recreated, workspace, resumed.blobs);
    const auto file = directory.file_for(epoch);
    check_loaded_blobs(job, comm, workspace, file);
    if (loaded.written_by_ranks != comm.size()) {
      spdlog::info("resumed job {} from epoch {} ({}) in {:.3f} s, written by {} ranks, now {}{}",
                   job.name(), epoch, file.string(), resumed.seconds, loaded.written_by_ranks,
                   comm.size(),
                   loaded.recreated.empty()
                       ? ""
                       : fmt::format(" (created anew: {})", fmt::join(loaded.recreated, ", ")));
    } else if (loaded.from_local_copies) {
      spdlog::info(
          "resumed job {} from epoch {} (the node-local copies in {}, each verified against {}) "
          "in {:.3f} s",
          job.name(), epoch, options.local_dir.string(), file.string(), resumed.seconds);
    } else {
      spdlog::info("resumed job {} from epoch {} ({}) in {:.3f} s", job.name(), epoch,
                   file.string(), resumed.seconds);
    }
    check_config_changes(job, comm, options, loaded.config_json, epoch, summary);
    return resumed;
  }
  if (!epochs.empty() && comm.is_root()) {
    spdlog::warn("no valid checkpoint in {}: starting from scratch",
                 options.checkpoint_dir.string());
  }
  return std::nullopt;
}

}  // namespace epochrun
