#include "epochrun/job_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include "checkpoint_saver.hpp"
#include "collective_errors.hpp"
#include "directory_lock.hpp"
#include "download_gather.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/mpi_session.hpp"
#include "fault_injection.hpp"
#include "human_bytes.hpp"
#include "post_commit_steps.hpp"
#include "preemption_signals.hpp"
#include "resume.hpp"
#include "run_history_file.hpp"
#include "run_metrics.hpp"
#include "seconds_since.hpp"
#include "slurm_environment.hpp"
#include "stop_decider.hpp"
#include "time_budget.hpp"

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

// An epoch's figures with its checkpoint: all of it when synchronous, its start when it went on
// in the background (its end is a "save" line).
EpochFigures epoch_figures(double epoch_seconds, const SaveOutcome& save) {
  if (save.in_background) {
    return {epoch_seconds, save.blocked_seconds, {}, {}};
  }
  return {epoch_seconds, save.blocked_seconds, save.seconds, save.bytes};
}

// Runs `step`, a task group or the stop conditions, which agree on a failure across the ranks.
// On a failure `complete` first commits the save in flight: the epoch before's, which a run
// without --async-checkpoint would have committed before this epoch began. The step's error
// is the one that propagates.
template <typename Step, typename Complete>
auto completing_on_failure(Step&& step, Complete&& complete) {
  try {
    return step();
  } catch (...) {
    try {
      complete();
    } catch (const std::exception& error) {
      spdlog::warn("the checkpoint in flight was not committed: {}", error.what());
    }
    throw;
  }
}

// The summary's record of one save: committed, failed, and what retention deleted after it.
void record_save(const SaveOutcome& save, RunSummary& summary) {
  if (save.committed) {
    summary.committed.push_back(save.epoch);
  }
  if (save.failure) {
    summary.failed_saves.push_back(FailedSave{save.epoch, *save.failure});
  }
  summary.deleted.insert(summary.deleted.end(), save.deleted.begin(), save.deleted.end());
}

// What the checkpoint layer takes of the run's options.
CheckpointOptions checkpoint_options(const RunOptions& options) {
  return CheckpointOptions{options.checkpoint_dir,
                           options.config_json,
                           options.retention,
                           options.uploader,
                           options.save_timeout,
                           options.async_checkpoint,
                           options.async_max_staging_bytes};
}

// Rank 0's lock on the checkpoint directory (none without a directory or when unlocked).
std::unique_ptr<DirectoryLock> lock_directory(const Communicator& comm, const RunOptions& options) {
  std::unique_ptr<DirectoryLock> lock;
  run_on_root_then_agree(comm, "lock", [&] {
    if (options.checkpoint_dir.empty()) {
      return;
    }
    if (!options.directory_lock) {
      spdlog::warn(
          "running without the checkpoint directory lock (--no-directory-lock): no other "
          "run may use {} meanwhile",
          options.checkpoint_dir.string());
      return;
    }
    lock = std::make_unique<DirectoryLock>(options.checkpoint_dir);
  });
  return lock;
}

}  // namespace

struct JobRunner::Steps {
  PostCommitSteps& post_commit;
  CheckpointSaver& saver;
  const RunMetrics& metrics;
};

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
  arm_fault_points(Communicator::world().rank());
  if (options_.async_checkpoint) {
    require_funneled_threads();
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

RunSummary JobRunner::run(Workspace& workspace) {
  const auto started = Clock::now();
  const auto started_at = std::chrono::system_clock::now();
  const PreemptionSignals signals(options_.preempt_signals);
  // Held by rank 0 for the whole run: nothing below may run twice on one directory.
  auto lock = lock_directory(comm_, options_);
  auto summary = begin_run();
  const auto checkpointing = checkpoint_options(options_);
  PostCommitSteps post_commit(comm_, checkpointing, job_.name());
  CheckpointSaver saver(job_.name(), comm_, checkpointing, node_names_, post_commit);
  const RunMetrics metrics(comm_, options_.checkpoint_dir, started_at);
  Steps steps{post_commit, saver, metrics};
  TaskContext context{workspace, job_comm_, node_name_, 0, nullptr};
  const StopDecider decider(job_, comm_, node_names_, options_.num_epochs, *time_budget_);
  const auto resumed = start(steps, context, summary);
  const auto decision = run_epochs(resumed, decider, signals, steps, context, summary);
  if (decision.finishes_job()) {
    finish_job(steps, context, summary);
  }
  summary.seconds = seconds_since(started);
  close_summary(decision, context.epoch, post_commit.latest(), summary);
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

std::optional<std::int64_t> JobRunner::start(Steps& steps, TaskContext& context,
                                             RunSummary& summary) {
  if (auto resumed = resume(job_, comm_, options_, node_names_, steps.post_commit.index(),
                            context.workspace, summary)) {
    summary.resumed_from = resumed->epoch;
    steps.metrics.load(resumed->epoch, resumed->seconds, resumed->bytes);
    steps.saver.set_blobs(std::move(resumed->blobs));
    steps.saver.resumed_from(resumed->epoch);
    // Until this run has saved, a save is taken to cost what the load did.
    time_budget_->record_save(resumed->seconds);
    return resumed->epoch;
  }
  const auto init_started = Clock::now();
  run_group(job_.init_group, context);
  const double init_seconds = seconds_since(init_started);
  // As in the reference: what init created is what every checkpoint of this run holds.
  steps.saver.set_blobs(context.workspace.names());
  spdlog::info("job {} initialized on {} ranks ({} blobs, {} on rank 0)", job_.name(), comm_.size(),
               context.workspace.names().size(),
               human_bytes(double(context.workspace.byte_size())));
  const auto save = steps.saver.save(0, context.workspace, true);
  record_save(save, summary);
  spdlog::info("epoch 0 (init) {}", save.log);
  if (!save.in_background) {
    time_budget_->record_save(save.seconds);
  }
  steps.metrics.epoch(0, epoch_figures(init_seconds, save));
  return std::nullopt;
}

StopDecision JobRunner::run_epochs(std::optional<std::int64_t> resumed, const StopDecider& decider,
                                   const PreemptionSignals& signals, Steps& steps,
                                   TaskContext& context, RunSummary& summary) {
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
      complete_save(steps, summary);
      if (steps.saver.last_committed() != context.epoch) {
        const auto save = steps.saver.save(context.epoch, context.workspace, false);
        record_save(save, summary);
        spdlog::info("epoch {} {}", context.epoch, save.log);
        steps.metrics.save(save);
      }
      spdlog::info("stopping before epoch {}: {}", context.epoch + 1, decision.reason);
      return decision;
    }
    ++context.epoch;
    const auto epoch_started = Clock::now();
    const auto complete = [&] { complete_save(steps, summary); };
    completing_on_failure([&] { run_group(job_.epoch_group, context); }, complete);
    fault_point("epoch", context.epoch);
    const double epoch_seconds = seconds_since(epoch_started);
    time_budget_->record_epoch(epoch_seconds);
    const auto decision = completing_on_failure(
        [&] { return decider.after_epoch(context.workspace, context.epoch); }, complete);
    if (decision.kind == StopKind::kPreempted) {
      signals.restore_defaults();
    }
    const auto save = [&] {
      // The checkpoints an asynchronous save's commit retires here are deleted after the next
      // save's lay-out, which would otherwise wait for the file system to free them.
      const auto deletions_wait = steps.post_commit.hold_removals();
      complete_save(steps, summary);
      return checkpoint_epoch(decision, steps, context, summary);
    }();
    ++summary.epochs_run;
    steps.metrics.epoch(context.epoch, save ? epoch_figures(epoch_seconds, *save)
                                            : EpochFigures{epoch_seconds, {}, {}, {}});
    spdlog::info(
        "epoch {} done in {:.3f} s; {}{}", context.epoch, epoch_seconds,
        save ? save->log
             : std::string("checkpoint skipped (") + options_.checkpoint_policy.skip_reason() + ")",
        decision.stops() ? "; stopping: " + decision.reason : "");
    if (decision.stops()) {
      return decision;
    }
  }
}

std::optional<SaveOutcome> JobRunner::checkpoint_epoch(const StopDecision& decision, Steps& steps,
                                                       const TaskContext& context,
                                                       RunSummary& summary) {
  if (!decision.stops() && !options_.checkpoint_policy.due(
                               context.epoch, seconds_since(steps.saver.last_commit_time()))) {
    return std::nullopt;
  }
  // The checkpoint a run stops with is synchronous: nothing follows that it could overlap.
  auto save = steps.saver.save(context.epoch, context.workspace, !decision.stops());
  record_save(save, summary);
  if (!save.in_background) {
    time_budget_->record_save(save.seconds);
  }
  return save;
}

void JobRunner::complete_save(Steps& steps, RunSummary& summary) {
  if (auto save = steps.saver.complete()) {
    record_save(*save, summary);
    time_budget_->record_save(save->seconds);
    spdlog::info("epoch {} {} (written in the background; the job waited {:.3f} s for the end)",
                 save->epoch, save->log, save->blocked_seconds);
    steps.metrics.save(*save);
  }
}

void JobRunner::finish_job(Steps& steps, TaskContext& context, RunSummary& summary) {
  // The job's final checkpoint: the newest this run committed or, when it committed none (it
  // resumed a loop that had already stopped), the one it resumed from.
  const auto final_epoch =
      !summary.committed.empty() ? std::optional(summary.committed.back()) : summary.resumed_from;
  if (const auto upload = steps.post_commit.upload(final_epoch)) {
    summary.uploaded_to = upload->destination;
    summary.upload_error = upload->error;
  }
  auto outputs = gather_outputs(job_, comm_, node_names_, context.workspace);
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
      const auto deleted = steps.post_commit.delete_all();
      summary.deleted.insert(summary.deleted.end(), deleted.begin(), deleted.end());
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
                              std::optional<std::int64_t> newest, RunSummary& summary) const {
  summary.last_epoch = last_epoch;
  summary.stop_kind = decision.kind;
  summary.stop_reason = decision.reason;
  summary.last_committed_epoch = newest;
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
      newest ? "the newest committed checkpoint is epoch " + std::to_string(*newest)
             : std::string("there is no committed checkpoint"),
      summary.exit_code);
}

bool JobRunner::load_blobs_from_checkpoints(const std::vector<BlobAddress>& wanted,
                                            std::int64_t epoch, Workspace& workspace) const {
  if (options_.checkpoint_dir.empty()) {
    throw UsageError("partial load needs a checkpoint directory");
  }
  return CheckpointDirectory(options_.checkpoint_dir).load_blobs(epoch, wanted, workspace);
}

}  // namespace epochrun