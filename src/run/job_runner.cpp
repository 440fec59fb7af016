#include "epochrun/job_runner.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>

#include "blob_plans.hpp"
#include "checkpoint_interval_choice.hpp"
#include "checkpoint_saver.hpp"
#include "collective_errors.hpp"
#include "directory_lock.hpp"
#include "download_gather.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/mpi_session.hpp"
#include "fault_injection.hpp"
#include "host_name.hpp"
#include "human_bytes.hpp"
#include "local_copy.hpp"
#include "post_commit_steps.hpp"
#include "preemption_signals.hpp"
#include "resume.hpp"
#include "run_history_file.hpp"
#include "run_metrics.hpp"
#include "seconds_since.hpp"
#include "shared_directory_check.hpp"
#include "slurm_environment.hpp"
#include "stop_decider.hpp"
#include "time_budget.hpp"

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

// slurm/epochrun.sbatch holds a preemption signal that comes while the ranks start, until they
// can act on it: no launcher lets a rank catch a signal before the rank's own code has run
// (docs/PREEMPTION.md). EPOCHRUN_READY_FILE names the file rank 0 creates once every rank has
// the run's handlers installed; from then on the script passes signals on at once.
void tell_the_launcher_that_the_ranks_catch_signals(const Communicator& comm) {
  const char* file = std::getenv("EPOCHRUN_READY_FILE");
  if (file == nullptr || *file == '\0') {
    return;
  }
  comm.barrier();
  if (comm.is_root() && !std::ofstream(file)) {
    spdlog::warn(
        "could not create {} (EPOCHRUN_READY_FILE): slurm/epochrun.sbatch waits for it and "
        "passes no preemption signal on to this run; only the time limit (--time-margin) can stop "
        "it in time",
        file);
  }
}

// An epoch's figures with its checkpoint: all of it when synchronous, its start when it went on
// in the background (its end is a "save" line).
EpochFigures epoch_figures(double epoch_seconds, const SaveOutcome& save) {
  if (save.in_background) {
    return {epoch_seconds, save.blocked_seconds, {}, {}, {}, {}, {}};
  }
  return {epoch_seconds, save.blocked_seconds, save.seconds,         save.bytes,
          save.phases,   save.array_paths,     save_level_name(save)};
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
  if (save.node_local) {
    summary.saved_node_local.push_back(save.epoch);
  }
  if (save.failure) {
    summary.failed_saves.push_back(FailedSave{save.epoch, *save.failure});
  }
  summary.deleted.insert(summary.deleted.end(), save.deleted.begin(), save.deleted.end());
  if (save.failure) {
    return;
  }
  // An asynchronous flush is recorded twice: at its start (in the background, the job's wait
  // for the copy) and at its end (the whole save, the job's wait for its end).
  auto& level = save.node_local ? summary.node_local_saves : summary.flushed_saves;
  level.blocked_seconds += save.blocked_seconds;
  if (save.committed || save.node_local) {
    ++level.saves;
    level.seconds += save.seconds;
    level.redundancy_seconds += save.phases.seconds[std::size_t(SavePhase::kRedundancy)];
  }
}

// What the checkpoint layer takes of the run's options.
CheckpointOptions checkpoint_options(const RunOptions& options) {
  return CheckpointOptions{options.checkpoint_dir,
                           options.config_json,
                           options.retention,
                           options.uploader,
                           options.save_timeout,
                           options.async_checkpoint,
                           options.async_max_staging_bytes,
                           ArrayIoOptions{options.array_io, options.mpi_io_hints},
                           options.check_replicated,
                           options.directory_lock,
                           options.local_dir,
                           FlushOptions{options.flush_every, options.flush_interval_seconds},
                           options.local_keep,
                           parse_local_redundancy(options.local_redundancy),
                           options.xdmf_file};
}

// The epoch of the newest checkpoint this run knows to be valid: the newest it committed or, when
// it committed none, the one it resumed from (nothing for a run from scratch that committed none).
std::optional<std::int64_t> last_valid_epoch(const RunSummary& summary) {
  return !summary.committed.empty() ? std::optional(summary.committed.back())
                                    : summary.resumed_from;
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

// Every rank can keep its node-local copies in --local-dir, on its own host, created there when
// missing (UsageError on every rank naming the lowest failing rank, its host and why,
// otherwise). Before anything is written into the checkpoint directory: a refused run leaves
// none.
void check_local_directories(const Communicator& comm, const RunOptions& options) {
  if (options.local_dir.empty()) {
    return;
  }
  // This rank's refusal; the agreement bounds the check in time (a hung node-local file system)
  // and passes on any other failure. The refusal itself is named once, with its rank and host,
  // in the words below (the agreement's would name the rank twice).
  std::string refused;
  run_then_agree_within(comm, "check --local-dir on every rank", options.save_timeout, [&] {
    try {
      check_local_directory(options.local_dir, options.checkpoint_dir);
    } catch (const UsageError& error) {
      refused = error.what();
    }
  });
  const auto refusals = comm.allgather(refused.empty() ? refused : host_name() + "\n" + refused);
  for (std::size_t rank = 0; rank < refusals.size(); ++rank) {
    if (const auto& refusal = refusals[rank]; !refusal.empty()) {
      const auto host_end = refusal.find('\n');
      throw UsageError("rank " + std::to_string(rank) + " on " + refusal.substr(0, host_end) +
                       ": " + refusal.substr(host_end + 1));
    }
  }
}

// Collective, once every rank's own check of --local-dir is done and rank 0 holds the
// checkpoint directory's lock: each rank removes from its --local-dir the probes of a check that
// crashed before their removal (every check picks a new name, so nothing else would remove
// them), and rank 0 says how many went on all hosts.
void remove_crashed_checks_probes(const Communicator& comm, const RunOptions& options) {
  if (options.local_dir.empty() || options.checkpoint_dir.empty() || !options.directory_lock) {
    return;
  }
  const auto removed =
      comm.allreduce(std::int64_t{remove_stale_local_probes(options.local_dir)}, Reduction::kSum);
  if (removed > 0 && comm.is_root()) {
    spdlog::info("removed {} probe file(s) of an interrupted start-up check from {}", removed,
                 options.local_dir.string());
  }
}

}  // namespace

struct JobRunner::Impl {
  Impl(Job job_to_run, const Communicator& job_communicator, RunOptions run_options);

  // This run's checkpoint steps: the post-commit steps, the saver, the metrics.
  struct Steps {
    PostCommitSteps& post_commit;
    CheckpointSaver& saver;
    const RunMetrics& metrics;
  };

  // The whole run, in order (JobRunner::run).
  RunSummary run(Workspace& workspace);
  // The summary's identity fields, the restart count and history in the log, and (rank 0) the
  // time limit.
  RunSummary begin_run();
  // The resume decision and the load, or init and checkpoint 0. Returns the epoch resumed from.
  std::optional<std::int64_t> start(Steps& steps, TaskContext& context, RunSummary& summary);
  // The epoch loop, from the epoch after `resumed` (or after init) until the decision to stop;
  // context.epoch is then the last epoch whose state the workspace holds.
  StopDecision run_epochs(std::optional<std::int64_t> resumed, const StopDecider& decider,
                          Steps& steps, TaskContext& context, RunSummary& summary);
  // Before an epoch: a stop that came since the last decision (a signal during init, the load
  // or the last checkpoint), with the checkpoint of context.epoch when it is not committed yet.
  std::optional<StopDecision> stop_before_epoch(const StopDecider& decider, Steps& steps,
                                                TaskContext& context, RunSummary& summary);
  // The next epoch: its group, the stop decision after it and its checkpoint (when due).
  StopDecision run_epoch(const StopDecider& decider, Steps& steps, TaskContext& context,
                         RunSummary& summary);
  // After a save: the first one measures what a checkpoint costs and, with --mtbf, chooses the
  // Young/Daly interval (applied with --checkpoint-every auto).
  void choose_interval(const SaveOutcome& save);
  // Saves the epoch that just ran when the checkpoint policy or a stop says so.
  std::optional<SaveOutcome> checkpoint_epoch(const StopDecision& decision, Steps& steps,
                                              const TaskContext& context, RunSummary& summary);
  // Collective: waits for the save in flight (if any) and commits it; logs it and its metrics,
  // and those of the background redundancy exchange it waited for.
  void complete_save(Steps& steps, RunSummary& summary);
  // The steps that belong to a finished job: upload, download, exit, delete-on-success.
  void finish_job(Steps& steps, TaskContext& context, RunSummary& summary);
  // Rank 0: appends this run's record to the run history and reads the history back.
  void record_run(std::chrono::system_clock::time_point started, RunSummary& summary) const;
  // The summary's closing fields, the same on every rank, and the closing log line.
  void close_summary(const StopDecision& decision, std::int64_t last_epoch,
                     std::optional<std::int64_t> newest_committed, RunSummary& summary) const;
  // Runs a task group on every rank; a failure on any rank fails the group on all of them.
  void run_group(const TaskGroup& group, TaskContext& context) const;

  Job job;
  Communicator job_comm;  // the tasks'
  Communicator comm;      // the runner's private duplicate
  RunOptions options;
  std::string node_name;
  std::vector<std::string> node_names;
  std::unique_ptr<TimeBudget> time_budget;  // rank 0's; measured on every rank
  CheckpointIntervalChoice interval_choice{options.mtbf_seconds};
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
    : impl_(std::make_unique<Impl>(std::move(job), comm, std::move(options))) {}

JobRunner::~JobRunner() = default;

RunSummary JobRunner::run(Workspace& workspace) {
  return impl_->run(workspace);
}

bool JobRunner::load_blobs_from_checkpoints(const std::vector<BlobAddress>& wanted,
                                            std::int64_t epoch, Workspace& workspace) const {
  if (impl_->options.checkpoint_dir.empty()) {
    throw UsageError("partial load needs a checkpoint directory");
  }
  return CheckpointDirectory(impl_->options.checkpoint_dir).load_blobs(epoch, wanted, workspace);
}

const std::string& JobRunner::node_name() const {
  return impl_->node_name;
}

JobRunner::Impl::Impl(Job job_to_run, const Communicator& job_communicator, RunOptions run_options)
    : job(std::move(job_to_run)),
      job_comm(job_communicator),
      comm(job_communicator.duplicate()),
      options(std::move(run_options)),
      node_name(Job::node_name(comm.rank())) {
  for (int rank = 0; rank < comm.size(); ++rank) {
    node_names.push_back(Job::node_name(rank));
  }
  arm_fault_points(Communicator::world().rank());
  if (options.async_checkpoint || !options.local_dir.empty()) {
    require_funneled_threads();
  }
}

void JobRunner::Impl::run_group(const TaskGroup& group, TaskContext& context) const {
  std::exception_ptr error;
  try {
    group.run(context);
  } catch (...) {
    error = std::current_exception();
  }
  try {
    raise_if_any_failed(comm, error, group.name() + " group", options.task_failure_timeout);
  } catch (const AgreementTimeout& timeout) {
    // The other ranks are stuck where this one will never go. Ending the job is the only way
    // out that does not leave them there until the scheduler's time limit.
    spdlog::critical(
        "{}; the other ranks did not learn of it within {:.0f} s (they are probably blocked in a "
        "collective call of the job): aborting the job",
        timeout.what(), options.task_failure_timeout.count());
    spdlog::default_logger()->flush();
    comm.abort(ExitCode::kJobFailed);
  }
}

RunSummary JobRunner::Impl::run(Workspace& workspace) {
  const auto started = Clock::now();
  const auto started_at = std::chrono::system_clock::now();
  // Installs the handlers for the whole run; the stop decider reads what they received.
  const PreemptionSignals signals(options.preempt_signals);
  tell_the_launcher_that_the_ranks_catch_signals(comm);
  // Nothing is written into the checkpoint directory before every check of the options'
  // directories passed: the lock's file is its first.
  check_local_directories(comm, options);
  // Held by rank 0 for the whole run: nothing below may run twice on one directory.
  auto lock = lock_directory(comm, options);
  check_shared_directory(comm, options.checkpoint_dir, options.save_timeout,
                         options.directory_lock);
  remove_crashed_checks_probes(comm, options);
  auto summary = begin_run();
  const auto checkpointing = checkpoint_options(options);
  PostCommitSteps post_commit(comm, checkpointing, job.name());
  CheckpointSaver saver(job.name(), comm, checkpointing, node_names, post_commit);
  const RunMetrics metrics(comm, options.checkpoint_dir, started_at);
  Steps steps{post_commit, saver, metrics};
  TaskContext context{workspace, job_comm, node_name, 0, nullptr};
  const StopDecider decider(job, comm, node_names, options.num_epochs, *time_budget);
  const auto resumed = start(steps, context, summary);
  const auto decision = run_epochs(resumed, decider, steps, context, summary);
  const auto settled = post_commit.settle(last_valid_epoch(summary));
  summary.deleted.insert(summary.deleted.end(), settled.begin(), settled.end());
  if (decision.finishes_job()) {
    finish_job(steps, context, summary);
  }
  summary.seconds = seconds_since(started);
  close_summary(decision, context.epoch, post_commit.latest(), summary);
  record_run(started_at, summary);
  post_commit.wait_for_the_index();
  // When run() returns on any rank, the directory is in its final state, lock released. (On
  // the failure paths every rank throws together and rank 0 drops the lock while unwinding.)
  lock.reset();
  comm.barrier();
  return summary;
}

RunSummary JobRunner::Impl::begin_run() {
  const auto slurm = SlurmEnvironment::of_this_process();
  RunSummary summary;
  summary.job = job.name();
  summary.num_ranks = comm.size();
  summary.checkpoint_dir = options.checkpoint_dir;
  summary.restart_count = slurm.restart_count;
  summary.slurm_job_id = slurm.job_id;
  time_budget = std::make_unique<TimeBudget>();
  if (!comm.is_root()) {
    return summary;
  }
  if (!options.checkpoint_dir.empty()) {
    spdlog::info("restart count {}{}; {} earlier run(s) in the run history ({})",
                 slurm.restart_count, slurm.job_id ? " (SLURM job " + *slurm.job_id + ")" : "",
                 read_run_history(options.checkpoint_dir).size(),
                 (options.checkpoint_dir / kRunHistoryFileName).string());
  }
  if (!options.mpi_io_hints.empty()) {
    std::vector<std::string> hints;
    for (const auto& [key, value] : options.mpi_io_hints) {
      hints.push_back(key + "=" + value);
    }
    spdlog::info("MPI-IO hints of the global arrays' collective writes and reads: {}",
                 fmt::join(hints, ", "));
  }
  *time_budget = make_time_budget(options.program_start, options.time_budget_seconds,
                                  options.time_margin_seconds, slurm);
  if (time_budget->limited()) {
    spdlog::info(
        "time limit: {:.0f} s left ({}); the run stops for a requeue when the next epoch would "
        "not end {:.0f} s before (--time-margin)",
        time_budget->seconds_left(Clock::now()), time_budget->source(),
        time_budget->margin_seconds());
  }
  return summary;
}

std::optional<std::int64_t> JobRunner::Impl::start(Steps& steps, TaskContext& context,
                                                   RunSummary& summary) {
  check_global_arrays(job, comm, options.save_timeout);
  if (auto resumed = resume(job, comm, options, node_names, steps.post_commit.index(),
                            context.workspace, summary)) {
    summary.resumed_from = resumed->epoch;
    summary.resumed_from_ranks = resumed->written_by_ranks;
    steps.metrics.load(resumed->epoch, resumed->seconds, resumed->bytes);
    steps.saver.set_blobs(blob_plans(job, comm, resumed->blobs));
    steps.saver.resumed_from(resumed->epoch, resumed->node_local);
    // Until this run has saved, a save is taken to cost what the load did.
    time_budget->record_save(resumed->seconds);
    return resumed->epoch;
  }
  const auto init_started = Clock::now();
  run_group(job.init_group, context);
  const double init_seconds = seconds_since(init_started);
  // As in the reference: what init created is what every checkpoint of this run holds.
  steps.saver.set_blobs(blob_plans(job, comm, context.workspace.names()));
  spdlog::info("job {} initialized on {} ranks ({} blobs, {} on rank 0)", job.name(), comm.size(),
               context.workspace.names().size(),
               human_bytes(double(context.workspace.byte_size())));
  const auto save = steps.saver.save(0, context.workspace, true);
  record_save(save, summary);
  spdlog::info("epoch 0 (init) {}", save.log);
  choose_interval(save);
  if (!save.in_background) {
    time_budget->record_save(save.seconds);
  }
  steps.metrics.epoch(0, epoch_figures(init_seconds, save));
  return std::nullopt;
}

StopDecision JobRunner::Impl::run_epochs(std::optional<std::int64_t> resumed,
                                         const StopDecider& decider, Steps& steps,
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
    if (auto stop = stop_before_epoch(decider, steps, context, summary)) {
      return *stop;
    }
    if (auto decision = run_epoch(decider, steps, context, summary); decision.stops()) {
      return decision;
    }
  }
}

std::optional<StopDecision> JobRunner::Impl::stop_before_epoch(const StopDecider& decider,
                                                               Steps& steps, TaskContext& context,
                                                               RunSummary& summary) {
  // A signal that came during init, the load or the last checkpoint: the workspace holds
  // the state of context.epoch, so stop here rather than run a whole epoch more.
  auto decision = decider.between_epochs();
  if (!decision.stops()) {
    return std::nullopt;
  }
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

StopDecision JobRunner::Impl::run_epoch(const StopDecider& decider, Steps& steps,
                                        TaskContext& context, RunSummary& summary) {
  ++context.epoch;
  const auto epoch_started = Clock::now();
  const auto complete = [&] { complete_save(steps, summary); };
  completing_on_failure([&] { run_group(job.epoch_group, context); }, complete);
  fault_point("epoch", context.epoch);
  const double epoch_seconds = seconds_since(epoch_started);
  time_budget->record_epoch(epoch_seconds);
  const auto decision = completing_on_failure(
      [&] { return decider.after_epoch(context.workspace, context.epoch); }, complete);
  const auto save = [&] {
    // The checkpoints an asynchronous save's commit retires here are deleted after the next
    // save's lay-out, which would otherwise wait for the file system to free them.
    const auto deletions_wait = steps.post_commit.hold_removals();
    complete_save(steps, summary);
    return checkpoint_epoch(decision, steps, context, summary);
  }();
  ++summary.epochs_run;
  steps.metrics.epoch(context.epoch, save ? epoch_figures(epoch_seconds, *save)
                                          : EpochFigures{epoch_seconds, {}, {}, {}, {}, {}, {}});
  spdlog::info("epoch {} done in {:.3f} s; {}{}", context.epoch, epoch_seconds,
               save
                   ? save->log
                   : std::string("checkpoint skipped (") +
                         (options.checkpoint_every_auto ? "--checkpoint-every auto"
                                                        : options.checkpoint_policy.skip_reason()) +
                         ")",
               decision.stops() ? "; stopping: " + decision.reason : "");
  return decision;
}

std::optional<SaveOutcome> JobRunner::Impl::checkpoint_epoch(const StopDecision& decision,
                                                             Steps& steps,
                                                             const TaskContext& context,
                                                             RunSummary& summary) {
  if (!decision.stops() && !options.checkpoint_policy.due(
                               context.epoch, seconds_since(steps.saver.last_commit_time()))) {
    return std::nullopt;
  }
  // The checkpoint a run stops with is synchronous: nothing follows that it could overlap.
  auto save = steps.saver.save(context.epoch, context.workspace, !decision.stops());
  record_save(save, summary);
  if (!save.in_background) {
    time_budget->record_save(save.seconds);
  }
  choose_interval(save);
  return save;
}

void JobRunner::Impl::choose_interval(const SaveOutcome& save) {
  const auto interval = interval_choice.after_save(save, comm);
  if (interval && options.checkpoint_every_auto) {
    options.checkpoint_policy.every.reset();
    options.checkpoint_policy.interval_seconds = *interval;
  }
}

void JobRunner::Impl::complete_save(Steps& steps, RunSummary& summary) {
  if (auto save = steps.saver.complete()) {
    record_save(*save, summary);
    time_budget->record_save(save->seconds);
    spdlog::info("epoch {} {} (written in the background; the job waited {:.3f} s for the end)",
                 save->epoch, save->log, save->blocked_seconds);
    steps.metrics.save(*save);
  }
  // complete() settles the node-local level's background exchange too, before every save and
  // at every stop: each is recorded here, once.
  for (const auto& exchange : steps.saver.take_settled_exchanges()) {
    steps.metrics.redundancy(exchange.epoch, exchange.seconds);
    summary.node_local_saves.redundancy_seconds += exchange.seconds;
    summary.node_local_saves.background_redundancy_seconds += exchange.seconds;
  }
}

void JobRunner::Impl::finish_job(Steps& steps, TaskContext& context, RunSummary& summary) {
  // The job's final checkpoint: the last one this run knows to be valid (the one it resumed from,
  // when it resumed a loop that had already stopped).
  if (const auto upload = steps.post_commit.upload(last_valid_epoch(summary))) {
    summary.uploaded_to = upload->destination;
    summary.upload_error = upload->error;
  }
  auto outputs = gather_outputs(job, comm, node_names, context.workspace);
  context.downloaded = comm.is_root() ? &outputs : nullptr;
  run_group(job.download_group, context);
  run_group(job.exit_group, context);
  context.downloaded = nullptr;
  if (options.delete_checkpoints_on_success) {
    if (summary.upload_error) {
      // The final state would then exist nowhere.
      if (comm.is_root()) {
        spdlog::warn("the upload failed: the checkpoints in {} are kept",
                     options.checkpoint_dir.string());
      }
    } else {
      const auto deleted = steps.post_commit.delete_all();
      steps.saver.delete_local_copies();
      summary.deleted.insert(summary.deleted.end(), deleted.begin(), deleted.end());
    }
  }
  summary.outputs = std::move(outputs);
}

void JobRunner::Impl::record_run(std::chrono::system_clock::time_point started,
                                 RunSummary& summary) const {
  if (!comm.is_root() || options.checkpoint_dir.empty()) {
    return;
  }
  try {
    append_run_record(options.checkpoint_dir,
                      run_record(summary, started, std::chrono::system_clock::now()));
  } catch (const std::exception& error) {
    // The run's work is done and committed; only its record is missing.
    spdlog::warn("run history not recorded: {}", error.what());
  }
  summary.history = read_run_history(options.checkpoint_dir);
}

void JobRunner::Impl::close_summary(const StopDecision& decision, std::int64_t last_epoch,
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
    spdlog::info("job {} finished after epoch {} in {:.3f} s", job.name(), last_epoch,
                 summary.seconds);
    return;
  }
  spdlog::warn(
      "job {} stopped after epoch {}, before it finished, in {:.3f} s ({}); {}; exit code {}: "
      "run it again with --resume-from-epoch latest",
      job.name(), last_epoch, summary.seconds, decision.reason,
      newest ? "the newest committed checkpoint is epoch " + std::to_string(*newest)
             : std::string("there is no committed checkpoint"),
      summary.exit_code);
}

}  // namespace epochrun
