#include "checkpoint_saver.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "blob_view.hpp"
#include "human_bytes.hpp"
#include "seconds_since.hpp"
#include "snapshot_copy.hpp"
#include "step_times.hpp"

namespace epochrun {

CheckpointSaver::CheckpointSaver(std::string job, const Communicator& comm,
                                 const CheckpointOptions& options,
                                 std::vector<std::string> node_names, PostCommitSteps& post_commit)
    : comm_(comm),
      options_(options),
      post_commit_(post_commit),
      local_(options.local_dir.empty() ? nullptr
                                       : std::make_unique<NodeLocalLevel>(job, comm, options)),
      shared_(std::move(job), comm, options, std::move(node_names)) {}

void CheckpointSaver::resumed_from(std::int64_t epoch, bool node_local) {
  if (!node_local) {
    last_committed_ = epoch;
  }
  last_commit_time_ = Clock::now();
  if (local_) {
    local_->resumed(epoch, node_local, last_commit_time_);
  }
}

void CheckpointSaver::set_blobs(std::vector<BlobPlan> blobs) {
  blobs_ = std::move(blobs);
  names_.clear();
  for (const auto& plan : blobs_) {
    names_.push_back(plan.name);
  }
}

SaveOutcome CheckpointSaver::save(std::int64_t epoch, const Workspace& workspace,
                                  bool may_run_in_background) {
  SaveOutcome outcome;
  outcome.epoch = epoch;
  if (options_.checkpoint_dir.empty()) {
    outcome.log = "no checkpoints (--no-checkpoints)";
    return outcome;
  }
  const auto started = Clock::now();
  const auto faults_before = PageFaults::now();
  post_commit_.make_room_for_a_save();
  for (const auto& plan : blobs_) {
    outcome.bytes += workspace.get(plan.name).byte_size();
  }
  auto route = this->route(epoch, may_run_in_background, outcome.bytes, started);
  auto blobs = saved_blobs(workspace);
  try {
    if (route.node_local) {
      if (auto copies = local_->begin(epoch, std::move(blobs), route, outcome)) {
        blobs = std::move(*copies);
      } else {
        // The node-local file system failed: the level is off, and this checkpoint is flushed
        // without a copy.
        route = this->route(epoch, may_run_in_background, outcome.bytes, started);
        blobs = saved_blobs(workspace);
      }
    }
    if (!route.flushed) {
      return saved_node_local(std::move(outcome), started, faults_before);
    }
    if (route.snapshot) {
      blobs = snapshot(std::move(blobs), outcome.phases);
    } else if (!route.node_local) {
      // The job's thread waits in the save, so the workspace stays as it is until the data step
      // returns: its large blobs, page-aligned (src/base/blob.cpp), go to the disk with direct
      // I/O where the file system takes it. In one shared file the page cache would take the
      // ranks' writes in turns, each paying the kernel's fresh pages (on a virtual machine whose
      // host takes freed memory back, a fault in the host per page) one rank after the other,
      // where the plain write's files, one per rank, pay them side by side
      // (docs/benchmarks.md, "Inside a job"). The data step opens a direct descriptor only for
      // blobs it can write through it (StreamingWriter::may_write_directly: a piece long at
      // least, page-aligned).
      for (auto& blob : blobs) {
        blob.view.direct = true;
      }
    }
    shared_.begin(epoch, std::move(blobs), route, outcome);
  } catch (const std::exception& error) {
    commit_failed(epoch, error, outcome);
    shared_.done(false);
    if (local_) {
      local_->done(false);
    }
    outcome.seconds = outcome.blocked_seconds = seconds_since(started);
    outcome.phases.faults = PageFaults::now() - faults_before;
    return outcome;
  }
  in_flight_started_ = started;
  in_flight_outcome_ = outcome;
  shared_.finish(route.later);
  if (!route.later) {
    auto committed = *complete();
    committed.seconds = committed.blocked_seconds = seconds_since(started);
    committed.phases.faults = PageFaults::now() - faults_before;
    return committed;
  }
  outcome.in_background = true;
  outcome.blocked_seconds = seconds_since(started);
  outcome.phases.faults = PageFaults::now() - faults_before;
  outcome.log =
      route.node_local
          ? fmt::format(
                "checkpoint staged in {} ({} in {:.3f} s), flushed to the checkpoint directory in "
                "the background",
                options_.local_dir.string(), human_bytes(double(outcome.bytes)),
                outcome.blocked_seconds)
          : fmt::format("checkpoint started in the background ({} snapshot in {:.3f} s)",
                        human_bytes(double(outcome.bytes)), outcome.blocked_seconds);
  in_flight_outcome_ = outcome;
  return outcome;
}

std::optional<SaveOutcome> CheckpointSaver::complete() {
  auto outcome = in_flight_outcome_;
  outcome.in_background = false;
  // The levels in the order the save went through them: the node-local level's finish-later
  // step (a node-local epoch's redundancy exchange in the background) is part of the save in
  // flight, waited for here as the shared file's write is next.
  if (local_) {
    local_->commit(outcome);
  }
  if (!shared_.in_flight()) {
    return std::nullopt;
  }
  const auto waiting = Clock::now();
  const auto faults_before = PageFaults::now();
  try {
    shared_.commit(outcome);
    committed(outcome);
  } catch (const std::exception& error) {
    commit_failed(outcome.epoch, error, outcome);
  }
  shared_.done(outcome.committed);
  if (local_) {
    local_->done(outcome.committed);
  }
  outcome.blocked_seconds = seconds_since(waiting);
  outcome.seconds = seconds_since(in_flight_started_);
  outcome.phases.faults += PageFaults::now() - faults_before;
  return outcome;
}

SaveRoute CheckpointSaver::route(std::int64_t epoch, bool may_run_in_background,
                                 std::uint64_t bytes, Clock::time_point now) {
  SaveRoute route;
  route.node_local = local_ && local_->active();
  route.flushed = !(route.node_local && may_run_in_background && !local_->flush_due(now));
  if (!route.flushed) {
    return route;
  }
  if (local_) {
    local_->saved(true, now);
  }
  // The last checkpoint and one at a stop are written at once: nothing follows that they could
  // overlap.
  route.later = may_run_in_background && (route.node_local || options_.async_checkpoint);
  if (route.later && !route.node_local && options_.async_max_staging_bytes) {
    const bool fits = bytes <= *options_.async_max_staging_bytes;
    if (comm_.allreduce_max(fits ? 0.0 : 1.0) != 0.0) {
      route.later = false;
      if (comm_.is_root()) {
        spdlog::info(
            "epoch {}: the snapshot ({} on this rank) exceeds --async-max-staging-mib {} on some "
            "rank: this checkpoint is saved synchronously",
            epoch, human_bytes(double(bytes)), *options_.async_max_staging_bytes >> 20);
      }
    }
  }
  route.snapshot = route.later && !route.node_local;
  return route;
}

std::vector<SavedBlob> CheckpointSaver::saved_blobs(const Workspace& workspace) const {
  auto views = blob_views(workspace, names_);
  std::vector<SavedBlob> saved;
  saved.reserve(views.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto& plan = blobs_[i];
    saved.push_back(SavedBlob{std::move(views[i]), plan.kind, plan.global_shape, plan.blocks});
  }
  return saved;
}

std::vector<SavedBlob> CheckpointSaver::snapshot(std::vector<SavedBlob> blobs, SavePhases& phases) {
  const PhaseTimer timer(phases, SavePhase::kSnapshot);
  staging_.resize(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    auto& view = blobs[i].view;
    const auto to = staging_[i].resize(view.bytes.size());
    // Hashed as it is copied: the background write then reads each byte once, for the disk.
    view.xxh64 = copy_and_hash(to, view.bytes);
    view.bytes = to;
    view.direct = true;
  }
  return blobs;
}

SaveOutcome CheckpointSaver::saved_node_local(SaveOutcome outcome, Clock::time_point started,
                                              PageFaults faults_before) {
  local_->saved(false, started);
  last_commit_time_ = Clock::now();
  outcome.log = fmt::format("checkpoint saved node-local in {} ({} in {:.3f} s, not flushed)",
                            options_.local_dir.string(), human_bytes(double(outcome.bytes)),
                            seconds_since(started));
  local_->done(true);
  outcome.seconds = outcome.blocked_seconds = seconds_since(started);
  outcome.phases.faults = PageFaults::now() - faults_before;
  return outcome;
}

void CheckpointSaver::committed(SaveOutcome& outcome) {
  const auto& stats = shared_.committed_file();
  outcome.committed = true;
  last_committed_ = outcome.epoch;
  last_commit_time_ = Clock::now();
  const auto after = Clock::now();
  {
    const PhaseTimer timer(outcome.phases, SavePhase::kPostCommit);
    outcome.deleted = post_commit_.after_commit(outcome.epoch, stats.file_bytes);
    if (local_) {
      local_->flushed();
    }
  }
  step_times::add_since("index and retention", after);
  outcome.log = fmt::format("checkpoint {} {} in {:.3f} s ({}/s)", stats.file.filename().string(),
                            human_bytes(double(stats.file_bytes)), stats.seconds,
                            human_bytes(double(stats.file_bytes) / std::max(stats.seconds, 1e-9)));
}

void CheckpointSaver::commit_failed(std::int64_t epoch, const std::exception& error,
                                    SaveOutcome& outcome) {
  // The reference's contract: a checkpoint that cannot be written does not stop the job.
  // Every rank gets the same agreed error; rank 0 reports it once.
  if (comm_.is_root()) {
    spdlog::warn("checkpoint for epoch {} failed, the job goes on: {}", epoch, error.what());
  }
  outcome.failure = error.what();
  outcome.log = "checkpoint FAILED (see warning)";
}

}  // namespace epochrun
