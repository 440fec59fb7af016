#include "epochrun/job_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include "blob_codec.hpp"
#include "collective_errors.hpp"
#include "config_changes.hpp"
#include "directory_lock.hpp"
#include "durable_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/run_history.hpp"
#include "fault_injection.hpp"
#include "preemption_signals.hpp"
#include "slurm_environment.hpp"
#include "stop_decider.hpp"
#include "time_budget.hpp"

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

JobRunner::~JobRunner() = default;

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

void JobRunner::check_config_changes(std::int64_t epoch, RunSummary& summary) const {
  run_on_root_then_agree(comm_, "resume", [&] {
    const auto file = CheckpointDirectory(options_.checkpoint_dir).file_for(epoch);
    summary.config_changes = job_config_changes(
        job_.name(), CheckpointReader(file).header().config_json, options_.config_json);
    refuse_run_defining_changes(job_, summary.config_changes, options_.allowed_config_changes,
                                epoch);
    for (const auto& change : summary.config_changes) {
      spdlog::info("configuration changed since the checkpoint of epoch {}: {} {} -> {} (applied)",
                   epoch, change.key, change.old_json, change.new_json);
    }
  });
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
  const auto started_at = std::chrono::system_clock::now();
  const PreemptionSignals signals(options_.preempt_signals);

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

  auto summary = begin_run();
  TaskContext context{workspace, job_comm_, node_name_, 0, nullptr};
  const StopDecider decider(job_, comm_, node_names_, options_.num_epochs, *time_budget_);
  const auto resumed = start(context, summary);
  const auto decision = run_epochs(resumed, decider, signals, context, summary);
  if (decision.finishes_job()) {
    finish_job(context, summary);
  }
  summary.seconds = seconds_since(started);
  close_summary(decision, context.epoch, summary);
  record_run(started_at, summary);
  // When run() returns on any rank, the directory is in its final state, lock file gone. (On
  // the failure paths every rank throws together and rank 0 drops the lock while unwinding.)
  lock.reset();
  comm_.barrier();
  return summary;
}

RunSummary JobRunner::begin_run() {
  const auto slurm = SlurmEnvironment::of_this_process();
  RunSummary summary;
  summary.job = job_.name();
  summary.num_ranks = comm_.size();
  summary.checkpoint_dir = options_.checkpoint_dir;
  summary.restart_count = slurm.restart_count;
  summary.slurm_job_id = slurm.job_id;
  time_budget_ = std::make_unique<TimeBudget>();
  if (!comm_.is_root()) {
    return summary;
  }
  if (!options_.checkpoint_dir.empty()) {
    spdlog::info("restart count {}{}; {} earlier run(s) in the run history ({})",
                 slurm.restart_count, slurm.job_id ? " (SLURM job " + *slurm.job_id + ")" : "",
                 read_run_history(options_.checkpoint_dir).size(),
                 (options_.checkpoint_dir / kRunHistoryFileName).string());
  }
  *time_budget_ = make_time_budget(options_.program_start, options_.time_budget_seconds,
                                   options_.time_margin_seconds, slurm);
  if (time_budget_->limited()) {
    spdlog::info(
        "time limit: {:.0f} s left ({}); the run stops for a requeue when the next epoch would "
        "not end {:.0f} s before (--time-margin)",
        time_budget_->seconds_left(Clock::now()), time_budget_->source(),
        time_budget_->margin_seconds());
  }
  return summary;
}

std::optional<std::int64_t> JobRunner::start(TaskContext& context, RunSummary& summary) {
  const auto load_started = Clock::now();
  const auto resumed = load_newest_valid(resume_candidates(), context.workspace, summary);
  summary.resumed_from = resumed;
  if (resumed) {
    check_config_changes(*resumed, summary);
    last_committed_ = resumed;
    last_commit_time_ = Clock::now();
    // Until this run has saved, a save is taken to cost what the load did.
    time_budget_->record_save(seconds_since(load_started));
    return resumed;
  }
  run_group(job_.init_group, context);
  // As in the reference: what init created is what every checkpoint of this run holds.
  checkpointed_blobs_ = context.workspace.names();
  spdlog::info("job {} initialized on {} ranks ({} blobs, {} on rank 0)", job_.name(), comm_.size(),
               checkpointed_blobs_.size(), human_bytes(double(context.workspace.byte_size())));
  const auto save_started = Clock::now();
  spdlog::info("epoch 0 (init) {}", save(0, context.workspace, summary));
  time_budget_->record_save(seconds_since(save_started));
  return std::nullopt;
}

StopDecision JobRunner::run_epochs(std::optional<std::int64_t> resumed, const StopDecider& decider,
                                   const PreemptionSignals& signals, TaskContext& context,
                                   RunSummary& summary) {
  context.epoch = resumed.value_or(0);
  // A checkpoint whose stop conditions already held is a finished loop (the run was stopped
  // after its last commit, before the exit group): running another epoch would train past
  // where the uninterrupted run stopped. The reference runs one more epoch here; we do not.
  if (resumed) {
    auto decision = decider.after_epoch(context.workspace, *resumed);
    if (decision.finishes_job()) {
      decision.kind = StopKind::kAlreadyStopped;
      decision.reason += " (already at the resumed epoch " + std::to_string(*resumed) + ")";
      return decision;
    }
  }
  while (true) {
    // A signal that came during init, the load or the last checkpoint: the workspace holds
    // the state of context.epoch, so stop here rather than run a whole epoch more.
    if (auto decision = decider.between_epochs(); decision.stops()) {
      signals.restore_defaults();
      if (last_committed_ != context.epoch) {
        spdlog::info("epoch {} {}", context.epoch, save(context.epoch, context.workspace, summary));
      }
      spdlog::info("stopping before epoch {}: {}", context.epoch + 1, decision.reason);
      return decision;
    }
    ++context.epoch;
    const auto epoch_started = Clock::now();
    run_group(job_.epoch_group, context);
    fault_point("epoch", context.epoch);
    const double epoch_seconds = seconds_since(epoch_started);
    time_budget_->record_epoch(epoch_seconds);
    const auto decision = decider.after_epoch(context.workspace, context.epoch);
    if (decision.kind == StopKind::kPreempted) {
      signals.restore_defaults();
    }
    const auto checkpoint = checkpoint_epoch(decision, context, summary);
    ++summary.epochs_run;
    spdlog::info("epoch {} done in {:.3f} s; {}{}", context.epoch, epoch_seconds, checkpoint,
                 decision.stops() ? "; stopping: " + decision.reason : "");
    if (decision.stops()) {
      return decision;
    }
  }
}

std::string JobRunner::checkpoint_epoch(const StopDecision& decision, const TaskContext& context,
                                        RunSummary& summary) {
  if (!decision.stops() &&
      !options_.checkpoint_policy.due(context.epoch, seconds_since(last_commit_time_))) {
    return std::string("checkpoint skipped (") + options_.checkpoint_policy.skip_reason() + ")";
  }
  const auto save_started = Clock::now();
  auto checkpoint = save(context.epoch, context.workspace, summary);
  time_budget_->record_save(seconds_since(save_started));
  return checkpoint;
}

void JobRunner::finish_job(TaskContext& context, RunSummary& summary) {
  upload(summary);
  auto outputs = gather_outputs(context.workspace);
  context.downloaded = comm_.is_root() ? &outputs : nullptr;
  run_group(job_.download_group, context);
  run_group(job_.exit_group, context);
  context.downloaded = nullptr;
  if (options_.delete_checkpoints_on_success) {
    if (summary.upload_error) {
      // The final state would then exist nowhere.
      if (comm_.is_root()) {
        spdlog::warn("the upload failed: the checkpoints in {} are kept",
                     options_.checkpoint_dir.string());
      }
    } else {
      delete_all_checkpoints(summary);
    }
  }
  summary.outputs = std::move(outputs);
}

void JobRunner::record_run(std::chrono::system_clock::time_point started,
                           RunSummary& summary) const {
  if (!comm_.is_root() || options_.checkpoint_dir.empty()) {
    return;
  }
  try {
    append_run_record(options_.checkpoint_dir,
                      run_record(summary, started, std::chrono::system_clock::now()));
  } catch (const std::exception& error) {
    // The run's work is done and committed; only its record is missing.
    spdlog::warn("run history not recorded: {}", error.what());
  }
  summary.history = read_run_history(options_.checkpoint_dir);
}

void JobRunner::close_summary(const StopDecision& decision, std::int64_t last_epoch,
                              RunSummary& summary) const {
  summary.last_epoch = last_epoch;
  summary.stop_kind = decision.kind;
  summary.stop_reason = decision.reason;
  std::int64_t newest = -1;
  if (comm_.is_root() && !options_.checkpoint_dir.empty()) {
    newest = CheckpointDirectory(options_.checkpoint_dir).latest_epoch().value_or(-1);
  }
  comm_.broadcast(newest);
  if (newest >= 0) {
    summary.last_committed_epoch = newest;
  }
  const auto code = decision.interrupted() ? ExitCode::kRequeue
                    : summary.upload_error ? ExitCode::kUploadFailed
                                           : ExitCode::kSuccess;
  summary.exit_code = static_cast<int>(code);
  if (!decision.interrupted()) {
    spdlog::info("job {} finished after epoch {} in {:.3f} s", job_.name(), last_epoch,
                 summary.seconds);
    return;
  }
  spdlog::warn(
      "job {} stopped after epoch {}, before it finished, in {:.3f} s ({}); {}; exit code {}: "
      "run it again with --resume-from-epoch latest",
      job_.name(), last_epoch, summary.seconds, decision.reason,
      newest >= 0 ? "the newest committed checkpoint is epoch " + std::to_string(newest)
                  : std::string("there is no committed checkpoint"),
      summary.exit_code);
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
    last_committed_ = epoch;
    last_commit_time_ = Clock::now();
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
