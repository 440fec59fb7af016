#include "epochrun/job_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include "blob_codec.hpp"
#include "collective_errors.hpp"
#include "directory_lock.hpp"
#include "durable_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const auto& part : parts) {
    text += (text.empty() ? "" : separator) + part;
  }
  return text;
}

}  // namespace

ResumeRequest ResumeRequest::parse(const std::string& text) {
  if (text == "latest") {
    return latest();
  }
  const bool digits_only =
      !text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits_only) {
    throw UsageError("invalid --resume-from-epoch '" + text +
                     "': expected a non-negative epoch number or 'latest'");
  }
  return at(std::stoll(text));
}

JobRunner::JobRunner(Job job, const Communicator& comm, RunOptions options)
    : job_(std::move(job)),
      job_comm_(comm),
      comm_(comm.duplicate()),
      options_(std::move(options)),
      node_name_(Job::node_name(comm_.rank())) {
  for (int rank = 0; rank < comm_.size(); ++rank) {
    node_names_.push_back(Job::node_name(rank));
  }
}

void JobRunner::run_group(const TaskGroup& group, TaskContext& context) const {
  std::exception_ptr error;
  try {
    group.run(context);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    raise_if_any_failed(comm_, error, group.name() + " group", options_.task_failure_timeout);
  } catch (const AgreementTimeout& timeout) {
    // The other ranks are stuck where this one will never go. Ending the job is the only way
    // out that does not leave them there until the scheduler's time limit.
    spdlog::critical(
        "{}; the other ranks did not learn of it within {:.0f} s (they are probably blocked in a "
        "collective call of the job): aborting the job",
        timeout.what(), options_.task_failure_timeout.count());
    spdlog::default_logger()->flush();
    MPI_Abort(comm_.raw(), static_cast<int>(ExitCode::kJobFailed));
  }
}

std::vector<std::int64_t> JobRunner::resume_candidates() const {
  // Rank 0 looks at the directory and decides; everyone follows, so that ranks with different
  // views of a shared file system can never start from different epochs.
  std::vector<std::int64_t> candidates;
  run_on_root_then_agree(comm_, "resume", [&] {
    const auto& request = options_.resume;
    CheckpointDirectory directory(options_.checkpoint_dir);
    // A run killed inside a save leaves its temporary file behind: give that space back.
    if (const int stale = directory.remove_stale_temporaries(); stale > 0) {
      spdlog::info("removed {} temporary file(s) of an interrupted save", stale);
    }
    if (request.kind != ResumeRequest::Kind::kFromScratch && options_.checkpoint_dir.empty()) {
      throw UsageError("resuming needs a checkpoint directory (--checkpoint-dir)");
    }
    if (request.kind == ResumeRequest::Kind::kEpoch) {
      if (!directory.has_epoch(request.epoch)) {
        throw CheckpointNotFound(directory.describe_missing(request.epoch));
      }
      candidates.push_back(request.epoch);
    } else if (request.kind == ResumeRequest::Kind::kLatest) {
      candidates = directory.committed_epochs();
      std::reverse(candidates.begin(), candidates.end());  // newest first
    }
  });
  comm_.broadcast(candidates);
  return candidates;
}

std::optional<std::int64_t> JobRunner::load_newest_valid(
    const std::vector<std::int64_t>& candidates, Workspace& workspace, RunSummary& summary) {
  CheckpointDirectory directory(options_.checkpoint_dir);
  for (auto epoch : candidates) {
    const auto load_started = Clock::now();
    try {
      checkpointed_blobs_ =
          directory.load(comm_, CheckpointExpectation{epoch, job_.name(), node_names_}, workspace,
                         options_.save_timeout);
    } catch (const CorruptCheckpoint& error) {
      // An explicit epoch must load or fail; `latest` falls back to the previous valid one.
      if (options_.resume.kind != ResumeRequest::Kind::kLatest) {
        throw;
      }
      if (comm_.is_root()) {
        spdlog::warn("skipping corrupt checkpoint of epoch {}: {}", epoch, error.what());
      }
      summary.skipped_corrupt.push_back(FailedSave{epoch, error.what()});
      continue;
    }
    check_loaded_blobs(workspace, directory.file_for(epoch));
    spdlog::info("resumed job {} from epoch {} ({}) in {:.3f} s", job_.name(), epoch,
                 directory.file_for(epoch).string(), seconds_since(load_started));
    return epoch;
  }
  if (!candidates.empty() && comm_.is_root()) {
    spdlog::warn("no valid checkpoint in {}: starting from scratch",
                 options_.checkpoint_dir.string());
  }
  return std::nullopt;
}

void JobRunner::check_loaded_blobs(const Workspace& workspace,
                                   const std::filesystem::path& file) const {
  run_then_agree(comm_, "checkpoint " + file.string(), [&] {
    for (const auto& expected : job_.expected_blobs()) {
      if (!workspace.has(expected.name)) {
        throw CheckpointMismatch("it has no blob '" + expected.name + "', which the job needs");
      }
      const auto& blob = workspace.get(expected.name);
      if (blob.dtype() != expected.dtype || blob.shape() != expected.shape) {
        throw CheckpointMismatch(
            "blob '" + expected.name + "' is " + std::string(dtype_name(blob.dtype())) +
            shape_to_string(blob.shape()) + " there, but the job now expects " +
            std::string(dtype_name(expected.dtype)) + shape_to_string(expected.shape) +
            " (was the configuration changed?)");
      }
    }
  });
}

RunSummary JobRunner::run(Workspace& workspace) {
  const auto started = Clock::now();
  RunSummary summary;
  summary.job = job_.name();
  summary.num_ranks = comm_.size();
  summary.checkpoint_dir = options_.checkpoint_dir;

  // Held by rank 0 for the whole run: nothing below may run twice on one directory.
  std::optional<DirectoryLock> lock;
  run_on_root_then_agree(comm_, "lock", [&] {
    if (options_.checkpoint_dir.empty()) {
      return;
    }
    if (!options_.directory_lock) {
      spdlog::warn(
          "running without the checkpoint directory lock (--no-directory-lock): no other "
          "run may use {} meanwhile",
          options_.checkpoint_dir.string());
      return;
    }
    lock.emplace(options_.checkpoint_dir);
  });

  const auto resume_epoch = load_newest_valid(resume_candidates(), workspace, summary);
  summary.resumed_from = resume_epoch;
  TaskContext context{workspace, job_comm_, node_name_, 0, nullptr};
  if (!resume_epoch) {
    run_group(job_.init_group, context);
    // As in the reference: what init created is what every checkpoint of this run holds.
    checkpointed_blobs_ = workspace.names();
    spdlog::info("job {} initialized on {} ranks ({} blobs, {} on rank 0)", job_.name(),
                 comm_.size(), checkpointed_blobs_.size(),
                 human_bytes(double(workspace.byte_size())));
    spdlog::info("epoch 0 (init) {}", save(0, workspace, summary));
  }

  std::int64_t epoch = resume_epoch ? *resume_epoch + 1 : 1;
  StopDecision decision;
  // A checkpoint whose stop conditions already held is a finished loop (the run was stopped
  // after its last commit, before the exit group): running another epoch would train past
  // where the uninterrupted run stopped. The reference runs one more epoch here; we do not.
  if (resume_epoch) {
    decision = decide_stop(workspace, *resume_epoch);
    if (decision.stop) {
      decision.reason += " (already at the resumed epoch " + std::to_string(*resume_epoch) + ")";
      epoch = *resume_epoch;
    }
  }
  if (!decision.stop) {
    while (true) {
      const auto epoch_started = Clock::now();
      context.epoch = epoch;
      run_group(job_.epoch_group, context);
      fault_point("epoch", epoch);
      decision = decide_stop(workspace, epoch);
      const double epoch_seconds = seconds_since(epoch_started);
      const auto checkpoint = save(epoch, workspace, summary);
      ++summary.epochs_run;
      spdlog::info("epoch {} done in {:.3f} s; {}{}", epoch, epoch_seconds, checkpoint,
                   decision.stop ? "; stopping: " + decision.reason : "");
      if (decision.stop) {
        break;
      }
      ++epoch;
    }
  }
  summary.last_epoch = epoch;
  summary.stop_reason = decision.reason;

  upload(summary);
  context.epoch = epoch;
  auto outputs = gather_outputs(workspace);
  context.downloaded = comm_.is_root() ? &outputs : nullptr;
  run_group(job_.download_group, context);
  run_group(job_.exit_group, context);
  if (options_.delete_checkpoints_on_success) {
    delete_all_checkpoints(summary);
  }
  summary.outputs = std::move(outputs);
  summary.seconds = seconds_since(started);
  spdlog::info("job {} finished after epoch {} in {:.3f} s", job_.name(), epoch, summary.seconds);
  // When run() returns on any rank, the directory is in its final state, lock file gone. (On
  // the failure paths every rank throws together and rank 0 drops the lock while unwinding.)
  lock.reset();
  comm_.barrier();
  return summary;
}

JobRunner::StopDecision JobRunner::decide_stop(const Workspace& workspace,
                                               std::int64_t epoch) const {
  // Every node evaluates its own conditions and sends the names of those that hold to rank 0.
  std::vector<std::string> holding;
  run_then_agree(comm_, "stop conditions after epoch " + std::to_string(epoch), [&] {
    for (const auto& condition : job_.stop_conditions()) {
      if (condition.holds(workspace)) {
        holding.push_back(condition.name);
      }
    }
  });
  const std::string mine = join(holding, "\n");
  auto reports = comm_.gather(std::as_bytes(std::span(mine.data(), mine.size())));

  // Rank 0 decides for everyone and broadcasts the reason; an empty reason means go on.
  std::string reason;
  if (comm_.is_root()) {
    std::map<std::string, std::vector<std::string>> nodes_by_condition;
    for (std::size_t rank = 0; rank < reports.size(); ++rank) {
      std::string text(reinterpret_cast<const char*>(reports[rank].data()), reports[rank].size());
      std::size_t begin = 0;
      while (begin < text.size()) {
        auto end = std::min(text.find('\n', begin), text.size());
        nodes_by_condition[text.substr(begin, end - begin)].push_back(node_names_[rank]);
        begin = end + 1;
      }
    }
    std::vector<std::string> reasons;
    for (const auto& [condition, nodes] : nodes_by_condition) {
      reasons.push_back("stop condition '" + condition + "' on " +
                        (nodes.size() == node_names_.size() ? "every node" : join(nodes, ", ")));
    }
    if (options_.num_epochs && epoch >= *options_.num_epochs) {
      reasons.push_back("epoch limit " + std::to_string(*options_.num_epochs) + " (--num-epochs)");
    }
    reason = join(reasons, "; ");
  }
  comm_.broadcast(reason);
  return StopDecision{!reason.empty(), reason};
}

std::string JobRunner::save(std::int64_t epoch, const Workspace& workspace, RunSummary& summary) {
  if (options_.checkpoint_dir.empty()) {
    return "no checkpoint directory";
  }
  CheckpointHeader header;
  header.epoch = epoch;
  header.job = job_.name();
  header.node_names = node_names_;
  header.config_json = options_.config_json;
  try {
    auto stats = CheckpointDirectory(options_.checkpoint_dir)
                     .save(comm_, header, workspace, checkpointed_blobs_, options_.save_timeout);
    summary.committed.push_back(epoch);
    apply_retention(epoch, summary);
    return fmt::format("checkpoint {} {} in {:.3f} s ({}/s)", stats.file.filename().string(),
                       human_bytes(double(stats.file_bytes)), stats.seconds,
                       human_bytes(double(stats.file_bytes) / std::max(stats.seconds, 1e-9)));
  } catch (const std::exception& error) {
    // The reference's contract: a checkpoint that cannot be written does not stop the job.
    // Every rank gets the same agreed error; rank 0 reports it once.
    if (comm_.is_root()) {
      spdlog::warn("checkpoint for epoch {} failed, the job goes on: {}", epoch, error.what());
    }
    summary.failed_saves.push_back(FailedSave{epoch, error.what()});
    return "checkpoint FAILED (see warning)";
  }
}

void JobRunner::upload(RunSummary& summary) const {
  if (!options_.uploader) {
    return;
  }
  std::string destination;
  std::string failure;
  if (comm_.is_root()) {
    try {
      // The job's final checkpoint: the newest this run committed or, when it committed none
      // (it resumed a loop that had already stopped), the one it resumed from.
      const auto final_epoch = !summary.committed.empty() ? std::optional(summary.committed.back())
                                                          : summary.resumed_from;
      if (!final_epoch) {
        throw Error("this run has no committed checkpoint to upload");
      }
      const auto file = CheckpointDirectory(options_.checkpoint_dir).file_for(*final_epoch);
      destination = options_.uploader->upload(file);
      spdlog::info("uploaded {} to {}", file.filename().string(), destination);
    } catch (const std::exception& error) {
      failure = error.what();
      spdlog::warn("upload failed: {}", failure);
    }
  }
  comm_.broadcast(destination);
  comm_.broadcast(failure);
  if (!failure.empty()) {
    summary.upload_error = failure;
  } else {
    summary.uploaded_to = destination;
  }
}

void JobRunner::apply_retention(std::int64_t just_committed, RunSummary& summary) const {
  if (options_.retention.keeps_everything()) {
    return;
  }
  delete_checkpoints(
      [&](const CheckpointDirectory& directory) {
        return options_.retention.epochs_to_delete(directory.committed_epochs(), just_committed);
      },
      "retention after epoch " + std::to_string(just_committed), summary);
}

void JobRunner::delete_all_checkpoints(RunSummary& summary) const {
  delete_checkpoints(
      [](const CheckpointDirectory& directory) { return directory.committed_epochs(); },
      "deletion after success", summary);
  if (comm_.is_root()) {
    std::error_code ignored;
    std::filesystem::remove(std::filesystem::path(options_.checkpoint_dir) / kIndexFileName,
                            ignored);
    spdlog::info("the job succeeded: its checkpoints in {} were deleted",
                 options_.checkpoint_dir.string());
  }
}

void JobRunner::delete_checkpoints(
    const std::function<std::vector<std::int64_t>(const CheckpointDirectory&)>& choose,
    const std::string& why, RunSummary& summary) const {
  // Rank 0 chooses from the directory and deletes; every rank records what went. A failure
  // here loses nothing (the checkpoints stay), so it is a warning.
  std::vector<std::int64_t> deleted;
  if (comm_.is_root()) {
    CheckpointDirectory directory(options_.checkpoint_dir);
    std::vector<std::int64_t> chosen;
    try {
      chosen = choose(directory);
      directory.remove(chosen);
    } catch (const std::exception& error) {
      spdlog::warn("{}: {}", why, error.what());
    }
    // What went is what is no longer there (a failed deletion leaves its epoch committed).
    const auto remaining = directory.committed_epochs();
    for (auto epoch : chosen) {
      if (!std::binary_search(remaining.begin(), remaining.end(), epoch)) {
        deleted.push_back(epoch);
      }
    }
    if (!deleted.empty()) {
      try {
        directory.write_index(job_.name());
      } catch (const std::exception& error) {
        spdlog::warn("{}: {}", why, error.what());
      }
    }
  }
  comm_.broadcast(deleted);
  summary.deleted.insert(summary.deleted.end(), deleted.begin(), deleted.end());
}

GatheredBlobs JobRunner::gather_outputs(const Workspace& workspace) const {
  std::map<std::string, Blob> mine;
  run_then_agree(comm_, "gather declared outputs", [&] {
    for (const auto& name : job_.outputs()) {
      mine.emplace(name, workspace.get(name));
    }
  });
  auto buffers = comm_.gather(encode_blobs(mine));
  GatheredBlobs gathered;
  for (std::size_t rank = 0; rank < buffers.size(); ++rank) {
    gathered[node_names_[rank]] = decode_blobs(buffers[rank]);
  }
  return gathered;
}

bool JobRunner::load_blobs_from_checkpoints(const std::vector<BlobAddress>& wanted,
                                            std::int64_t epoch, Workspace& workspace) const {
  if (options_.checkpoint_dir.empty()) {
    throw UsageError("partial load needs a checkpoint directory");
  }
  return CheckpointDirectory(options_.checkpoint_dir).load_blobs(epoch, wanted, workspace);
}

}  // namespace epochrun
