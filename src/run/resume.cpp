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
#include "local_epoch_load.hpp"
#include "local_manifest.hpp"
#include "seconds_since.hpp"

namespace epochrun {
namespace {

// An epoch a resume may start from: flushed (a committed checkpoint file), node-local (a
// manifest in the checkpoint directory), or both.
struct Candidate {
  std::int64_t epoch = 0;
  bool flushed = false;
  bool node_local = false;
};

// The epochs to try, in order: none (from scratch), the explicit one, or every committed or
// node-local epoch newest first (`latest`).
std::vector<Candidate> candidates(const Communicator& comm, const RunOptions& options,
                                  const CheckpointIndex* index) {
  // Rank 0 looks at the directory and decides; everyone follows, so that ranks with different
  // views of a shared file system can never start from different epochs.
  std::vector<std::int64_t> flat;  // epoch, flushed, node-local; ...
  run_on_root_then_agree(comm, "resume", [&] {
    const auto& request = options.resume;
    if (request.kind != ResumeRequest::Kind::kFromScratch && index == nullptr) {
      throw UsageError("resuming needs a checkpoint directory (--checkpoint-dir)");
    }
    if (request.kind == ResumeRequest::Kind::kFromScratch) {
      return;
    }
    const auto committed = index->epochs();
    // Without --local-dir too: a node-local epoch newer than every flushed one cannot load
    // then, and the resume says so (and what it costs) rather than pass over it.
    auto node_local = local_manifest_epochs(options.checkpoint_dir);
    if (options.local_dir.empty()) {
      std::erase_if(node_local, [&](std::int64_t epoch) {
        return std::binary_search(committed.begin(), committed.end(), epoch);
      });
    }
    std::vector<std::int64_t> all = committed;
    all.insert(all.end(), node_local.begin(), node_local.end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    if (request.kind == ResumeRequest::Kind::kEpoch) {
      if (!std::binary_search(all.begin(), all.end(), request.epoch)) {
        throw CheckpointNotFound(index->directory().describe_missing(request.epoch));
      }
      all.assign(1, request.epoch);
    }
    for (auto epoch = all.rbegin(); epoch != all.rend(); ++epoch) {  // newest first
      flat.push_back(*epoch);
      flat.push_back(std::binary_search(committed.begin(), committed.end(), *epoch));
      flat.push_back(std::binary_search(node_local.begin(), node_local.end(), *epoch));
    }
  });
  comm.broadcast(flat);
  std::vector<Candidate> epochs;
  for (std::size_t i = 0; i + 2 < flat.size(); i += 3) {
    epochs.push_back(Candidate{flat[i], flat[i + 1] != 0, flat[i + 2] != 0});
  }
  return epochs;
}

// Collective: the manifest of node-local epoch `epoch`, read by rank 0 (CorruptCheckpoint on
// every rank when it is damaged).
LocalManifest shared_manifest(const Communicator& comm, const RunOptions& options,
                              std::int64_t epoch) {
  std::string text;
  run_on_root_then_agree(comm, "node-local epoch " + std::to_string(epoch), [&] {
    text = local_manifest_text(read_local_manifest(options.checkpoint_dir, epoch));
  });
  comm.broadcast(text);
  return parse_local_manifest(text, local_manifest_file(options.checkpoint_dir, epoch).string());
}

// The hosts a manifest's copies were written on, each with its ranks: "host1 (ranks 0, 1)".
std::string hosts_of(const LocalManifest& manifest) {
  std::vector<std::pair<std::string, std::vector<int>>> hosts;
  for (const auto& part : manifest.parts) {
    auto found = std::find_if(hosts.begin(), hosts.end(),
                              [&](const auto& host) { return host.first == part.host; });
    if (found == hosts.end()) {
      found = hosts.emplace(hosts.end(), part.host, std::vector<int>{});
    }
    found->second.push_back(part.rank);
  }
  std::vector<std::string> described;
  for (const auto& [host, ranks] : hosts) {
    described.push_back(
        fmt::format("{} (rank{} {})", host, ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", ")));
  }
  return fmt::format("{}", fmt::join(described, ", "));
}

// The newest epoch a resume could not recover, and why.
struct Unrecoverable {
  std::int64_t epoch = 0;
  std::string why;
};

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

// Collective: node-local epoch `epoch` loaded into `workspace` from the ranks' copies, and the
// line that says so. CheckpointError (the same on every rank) when it is not recoverable.
Loaded load_node_local(const Job& job, const Communicator& comm, const RunOptions& options,
                       const std::vector<std::string>& node_names, std::int64_t epoch,
                       Workspace& workspace, std::string& where) {
  const auto manifest = shared_manifest(comm, options, epoch);
  auto request = load_request(job, comm, epoch, node_names, options.mpi_io_hints);
  auto loaded =
      load_local_epoch(options.local_dir, manifest, request, comm, workspace, options.save_timeout);
  where = fmt::format(
      "node-local epoch {}: every rank's copy in {} verified against {}; parts "
      "written on {}",
      epoch, options.local_dir.string(),
      local_manifest_file(options.checkpoint_dir, epoch).string(), hosts_of(manifest));
  if (!loaded.recovered_parts.empty()) {
    where += "; " + loaded.recovered_parts;
  }
  return loaded;
}

}  // namespace

std::optional<Resumed> resume(const Job& job, const Communicator& comm, const RunOptions& options,
                              const std::vector<std::string>& node_names,
                              const CheckpointIndex* index, Workspace& workspace,
                              RunSummary& summary) {
  const CheckpointDirectory directory(options.checkpoint_dir);
  const auto epochs = candidates(comm, options, index);
  std::optional<Unrecoverable> lost;  // the newest node-local epoch that could not be loaded
  for (const auto& candidate : epochs) {
    const auto epoch = candidate.epoch;
    const auto load_started = std::chrono::steady_clock::now();
    Resumed resumed;
    resumed.epoch = epoch;
    Loaded loaded;
    std::string where;
    if (candidate.node_local) {
      try {
        if (options.local_dir.empty()) {
          throw CheckpointNotFound(fmt::format(
              "node-local epoch {} ({}) is read from the ranks' --local-dir, and this run has none",
              epoch, local_manifest_file(options.checkpoint_dir, epoch).string()));
        }
        loaded = load_node_local(job, comm, options, node_names, epoch, workspace, where);
        resumed.node_local = true;
      } catch (const CheckpointError& error) {
        // The newest lost epoch is in the one line that says where the resume went; older
        // ones are only logged.
        if (!lost) {
          lost = Unrecoverable{epoch, error.what()};
        } else if (comm.is_root()) {
          spdlog::info("node-local epoch {} not recoverable either: {}", epoch, error.what());
        }
        if (!candidate.flushed) {
          if (options.resume.kind != ResumeRequest::Kind::kLatest) {
            throw;
          }
          continue;
        }
      }
    }
    if (!resumed.node_local) {
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
    }
    resumed.seconds = seconds_since(load_started);
    resumed.bytes = workspace.byte_size();
    resumed.blobs = std::move(loaded.blobs);
    resumed.written_by_ranks = loaded.written_by_ranks;
    recreate(job, comm, loaded.recreated, workspace, resumed.blobs);
    const auto file = resumed.node_local ? local_manifest_file(options.checkpoint_dir, epoch)
                                         : directory.file_for(epoch);
    check_loaded_blobs(job, comm, workspace, file);
    if (loaded.written_by_ranks != comm.size()) {
      spdlog::info("resumed job {} from epoch {} ({}) in {:.3f} s, written by {} ranks, now {}{}",
                   job.name(), epoch, file.string(), resumed.seconds, loaded.written_by_ranks,
                   comm.size(),
                   loaded.recreated.empty()
                       ? ""
                       : fmt::format(" (created anew: {})", fmt::join(loaded.recreated, ", ")));
    } else if (resumed.node_local) {
      spdlog::info("resumed job {} from {} in {:.3f} s", job.name(), where, resumed.seconds);
    } else if (loaded.from_local_copies) {
      spdlog::info(
          "resumed job {} from epoch {} (the node-local copies in {}, each verified against {}) "
          "in {:.3f} s",
          job.name(), epoch, options.local_dir.string(), file.string(), resumed.seconds);
    } else {
      spdlog::info("resumed job {} from epoch {} ({}) in {:.3f} s", job.name(), epoch,
                   file.string(), resumed.seconds);
    }
    summary.resumed_from_level = loaded.from_local_copies ? "node-local" : "flushed";
    if (!loaded.recovered_parts.empty()) {
      summary.resumed_parts = loaded.recovered_parts;
    }
    if (lost) {
      summary.resume_note =
          fmt::format("epoch {} not recoverable: {}; resuming from {} epoch {}, {} epoch{} lost",
                      lost->epoch, lost->why, resumed.node_local ? "node-local" : "flushed", epoch,
                      lost->epoch - epoch, lost->epoch - epoch == 1 ? "" : "s");
      if (comm.is_root()) {
        spdlog::warn("{}", *summary.resume_note);
      }
    }
    check_config_changes(job, comm, options, loaded.config_json, epoch, summary);
    return resumed;
  }
  if (!epochs.empty() && comm.is_root()) {
    spdlog::warn("no valid checkpoint in {}: starting from scratch",
                 options.checkpoint_dir.string());
  }
  if (lost) {
    summary.resume_note = fmt::format(
        "epoch {} not recoverable: {}; starting from scratch, {} "
        "epochs lost",
        lost->epoch, lost->why, lost->epoch);
  }
  return std::nullopt;
}

}  // namespace epochrun
