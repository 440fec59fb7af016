#include "checkpoint_saver.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "blob_view.hpp"
#include "checkpoint_directory_admin.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "human_bytes.hpp"
#include "local_copy.hpp"
#include "mpi_thread_level.hpp"
#include "seconds_since.hpp"
#include "snapshot_copy.hpp"
#include "step_times.hpp"

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

CheckpointSaver::CheckpointSaver(std::string job, const Communicator& comm,
                                 const CheckpointOptions& options,
                                 std::vector<std::string> node_names, PostCommitSteps& post_commit)
    : job_(std::move(job)),
      comm_(comm),
      options_(options),
      node_names_(std::move(node_names)),
      post_commit_(post_commit),
      level_(job_, comm, options),
      schedule_(options.flush) {
  const bool in_background = !options_.checkpoint_dir.empty() &&
                             (options_.async_checkpoint || !options_.local_dir.empty());
  // Agreed: every rank seals where the others do.
  if (in_background && comm_.allreduce_max(mpi_calls_from_any_thread() ? 0.0 : 1.0) == 0.0) {
    background_comm_ = comm_.duplicate();
  }
}

CheckpointSaver::~CheckpointSaver() {
  if (writer_.joinable()) {
    writer_.join();
  }
}

void CheckpointSaver::resumed_from(std::int64_t epoch, bool node_local) {
  if (!node_local) {
    last_committed_ = epoch;
  }
  last_commit_time_ = Clock::now();
  schedule_.resumed(last_commit_time_, !node_local);
  level_.resumed(epoch, node_local);
}

void CheckpointSaver::set_blobs(std::vector<BlobPlan> blobs) {
  blobs_ = std::move(blobs);
  names_.clear();
  for (const auto& plan : blobs_) {
    names_.push_back(plan.name);
  }
}

SavedFile CheckpointSaver::root_for(std::int64_t epoch) const {
  return SavedFile{epoch, job_, node_names_, options_.config_json};
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

DirectorySave CheckpointSaver::begin_save(std::int64_t epoch, std::vector<SavedBlob> blobs,
                                          const Communicator& on) const {
  return DirectorySave::begin(CheckpointDirectory(options_.checkpoint_dir), on, root_for(epoch),
                              std::move(blobs), options_.save_timeout, options_.arrays,
                              options_.check_replicated);
}

bool CheckpointSaver::staging_fits(std::uint64_t bytes) const {
  if (!options_.async_max_staging_bytes) {
    return true;
  }
  const bool fits = bytes <= *options_.async_max_staging_bytes;
  return comm_.allreduce_max(fits ? 0.0 : 1.0) == 0.0;
}

std::vector<SavedBlob> CheckpointSaver::snapshot(const Workspace& workspace) {
  auto blobs = saved_blobs(workspace);
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
  if (level_.active() && may_run_in_background && !flush_due(started)) {
    return save_node_local(epoch, workspace, std::move(outcome), started);
  }
  schedule_.saved(true, started);
  const bool staged = level_.active();
  const bool background = (options_.async_checkpoint || staged) && may_run_in_background;
  if (background && !staged && !staging_fits(outcome.bytes)) {
    if (comm_.is_root()) {
      spdlog::info(
          "epoch {}: the snapshot ({} on this rank) exceeds --async-max-staging-mib {} on some "
          "rank: this checkpoint is saved synchronously",
          epoch, human_bytes(double(outcome.bytes)), *options_.async_max_staging_bytes >> 20);
    }
  } else if (background || staged) {
    try {
      std::optional<PhaseTimer> copying(std::in_place, outcome.phases, SavePhase::kSnapshot);
      auto copied = staged ? local_copy(epoch, workspace) : std::optional(snapshot(workspace));
      if (!copied) {
        // The node-local file system failed: this checkpoint is flushed without a copy.
        return save(epoch, workspace, may_run_in_background);
      }
      auto copies = std::move(*copied);
      copying.reset();
      if (staged && background) {
        // Committed node-local while the flush runs. A flush at once (the last checkpoint, one
        // at a stop) has no epoch boundary to wait for, and a stop no time for an exchange.
        level_.commit_while_flushed(epoch, mapped_->record(), outcome.phases);
      }
      in_flight_.emplace(begin_save(epoch, std::move(copies),
                                    background && background_comm_ ? *background_comm_ : comm_));
      note_array_paths(*in_flight_, outcome);
    } catch (const std::exception& error) {
      commit_failed(epoch, error, outcome);
      local_copy_done(false);
      outcome.seconds = outcome.blocked_seconds = seconds_since(started);
      return outcome;
    }
    in_flight_started_ = started;
    in_flight_outcome_ = outcome;
    if (!background) {
      // The last checkpoint, or one at a stop: flushed from the node-local copy at once.
      in_flight_->write_data();
      auto flushed = *complete();
      flushed.seconds = flushed.blocked_seconds = seconds_since(started);
      flushed.phases.faults = PageFaults::now() - faults_before;
      return flushed;
    }
    writer_ = std::thread([this, seal = background_comm_.has_value()] {
      in_flight_->write_data();
      if (seal) {
        in_flight_->seal();
      }
    });
    outcome.in_background = true;
    outcome.blocked_seconds = seconds_since(started);
    outcome.phases.faults = PageFaults::now() - faults_before;
    outcome.log =
        staged ? fmt::format(
                     "checkpoint staged in {} ({} in {:.3f} s), flushed to the checkpoint "
                     "directory in the background",
                     options_.local_dir.string(), human_bytes(double(outcome.bytes)),
                     outcome.blocked_seconds)
               : fmt::format("checkpoint started in the background ({} snapshot in {:.3f} s)",
                             human_bytes(double(outcome.bytes)), outcome.blocked_seconds);
    in_flight_outcome_ = outcome;
    return outcome;
  }
  try {
    // The job's thread waits in the save, so the workspace stays as it is until the data step
    // returns: its large blobs, page-aligned (src/base/blob.cpp), go to the disk with direct I/O
    // where the file system takes it. In one shared file the page cache would take the ranks'
    // writes in turns, each paying the kernel's fresh pages (on a virtual machine whose host
    // takes freed memory back, a fault in the host per page) one rank after the other, where
    // the plain write's files, one per rank, pay them side by side (docs/benchmarks.md,
    // "Inside a job").
    // The data step opens a direct descriptor only for blobs it can write through it
    // (StreamingWriter::may_write_directly: a piece long at least, page-aligned).
    auto blobs = saved_blobs(workspace);
    for (auto& blob : blobs) {
      blob.view.direct = true;
    }
    auto save = begin_save(epoch, std::move(blobs), comm_);
    note_array_paths(save, outcome);
    const auto writing = Clock::now();
    save.write_data();
    step_times::add_since("write data", writing);
    const auto stats = save.commit();
    outcome.phases += save.phases();
    committed(stats, outcome);
  } catch (const std::exception& error) {
    commit_failed(epoch, error, outcome);
  }
  outcome.seconds = outcome.blocked_seconds = seconds_since(started);
  outcome.phases.faults = PageFaults::now() - faults_before;
  return outcome;
}

bool CheckpointSaver::flush_due(Clock::time_point now) const {
  const bool due = schedule_.due(now);
  // By count every rank decides alike; by time, each rank's clock: any rank's says so.
  return schedule_.options().interval_seconds ? comm_.any_true(due) : due;
}

SaveOutcome CheckpointSaver::save_node_local(std::int64_t epoch, const Workspace& workspace,
                                             SaveOutcome outcome, Clock::time_point started) {
  const auto faults_before = PageFaults::now();
  try {
    if (!level_.save(epoch, saved_blobs(workspace), outcome.phases)) {
      return save(epoch, workspace, true);  // the level is off: flushed
    }
    outcome.node_local = true;
    schedule_.saved(false, started);
    last_commit_time_ = Clock::now();
    outcome.log = fmt::format("checkpoint saved node-local in {} ({} in {:.3f} s, not flushed)",
                              options_.local_dir.string(), human_bytes(double(outcome.bytes)),
                              seconds_since(started));
  } catch (const std::exception& error) {
    commit_failed(epoch, error, outcome);
  }
  level_.retain();
  outcome.seconds = outcome.blocked_seconds = seconds_since(started);
  outcome.phases.faults = PageFaults::now() - faults_before;
  return outcome;
}

std::optional<std::vector<SavedBlob>> CheckpointSaver::local_copy(std::int64_t epoch,
                                                                  const Workspace& workspace) {
  // Agreed, so that no rank lays out a shared file the others will not write; one bounded
  // agreement whatever the rank count.
  auto blobs = saved_blobs(workspace);
  std::vector<SavedBlob> flushed;
  const auto written = level_.write_copies(epoch, blobs, [&] {
    mapped_.emplace(
        MappedLocalCopy::open(local_copy_file(options_.local_dir, epoch, comm_.rank())));
    flushed = mapped_->flushed(blobs);
  });
  if (!written) {
    mapped_.reset();
    return std::nullopt;
  }
  return flushed;
}

void CheckpointSaver::local_copy_done(bool committed) {
  if (mapped_ && committed) {
    level_.kept(mapped_->record().epoch);
  }
  mapped_.reset();
  level_.retain();
}

void CheckpointSaver::delete_local_copies() {
  level_.delete_all();
}

std::optional<SaveOutcome> CheckpointSaver::complete() {
  // A node-local epoch's redundancy exchange in the background (LocalLevel) is part of the
  // save in flight: waited for here as the flush's write is.
  level_.settle();
  if (!in_flight_) {
    return std::nullopt;
  }
  const auto waiting = Clock::now();
  const auto faults_before = PageFaults::now();
  if (writer_.joinable()) {
    writer_.join();
  }
  auto outcome = in_flight_outcome_;
  outcome.in_background = false;
  try {
    const auto stats = in_flight_->commit();
    outcome.phases += in_flight_->phases();
    committed(stats, outcome);
  } catch (const std::exception& error) {
    commit_failed(outcome.epoch, error, outcome);
  }
  in_flight_.reset();
  local_copy_done(outcome.committed);
  outcome.blocked_seconds = seconds_since(waiting);
  outcome.seconds = seconds_since(in_flight_started_);
  outcome.phases.faults += PageFaults::now() - faults_before;
  return outcome;
}

void CheckpointSaver::committed(const SaveStats& stats, SaveOutcome& outcome) {
  outcome.committed = true;
  last_committed_ = outcome.epoch;
  last_commit_time_ = Clock::now();
  const auto after = Clock::now();
  {
    const PhaseTimer timer(outcome.phases, SavePhase::kPostCommit);
    outcome.deleted = post_commit_.after_commit(outcome.epoch, stats.file_bytes);
    level_.flushed();
  }
  step_times::add_since("index and retention", after);
  outcome.log = fmt::format("checkpoint {} {} in {:.3f} s ({}/s)", stats.file.filename().string(),
                            human_bytes(double(stats.file_bytes)), stats.seconds,
                            human_bytes(double(stats.file_bytes) / std::max(stats.seconds, 1e-9)));
}

void CheckpointSaver::note_array_paths(const DirectorySave& save, SaveOutcome& outcome) {
  outcome.array_paths = save.array_paths();
  if (!comm_.is_root() || outcome.array_paths.empty() ||
      outcome.array_paths == logged_array_paths_) {
    return;
  }
  std::vector<std::string> paths;
  for (const auto& [name, path] : outcome.array_paths) {
    paths.push_back(fmt::format("'{}' {}", name, array_path_name(path)));
  }
  spdlog::info(
      "global arrays written {} (--array-io {}; direct: each rank writes its band of whole rows "
      "itself, with direct I/O; mpiio: one collective MPI-IO write)",
      fmt::join(paths, ", "), array_io_name(options_.arrays.path));
  const bool collective =
      std::any_of(outcome.array_paths.begin(), outcome.array_paths.end(),
                  [](const auto& path) { return path.second == ArrayPath::kMpiIo; });
  if (collective && options_.async_checkpoint) {
    // Measured (docs/benchmarks.md, "Inside a job"): the background thread's collective write
    // copies every byte through the page cache on the job's CPUs, and the job paid as much as a
    // synchronous save, or more.
    spdlog::info(
        "an asynchronous save of a global array by collective MPI-IO takes the job's CPUs for "
        "its copies into the page cache, and may cost the job more than a synchronous one: "
        "without --async-checkpoint the save waits for the disk instead");
  }
  logged_array_paths_ = outcome.array_paths;
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
