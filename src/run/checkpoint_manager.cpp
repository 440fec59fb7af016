#include "epochrun/checkpoint_manager.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <exception>

#include "blob_plans.hpp"
#include "checkpoint_manager_impl.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "host_name.hpp"
#include "local_copy.hpp"
#include "shared_directory_check.hpp"

namespace epochrun {
namespace {

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

// The directory's lock, once every rank can write its node-local directory (nothing is written
// into the checkpoint directory before every check of the options' directories passed: the
// lock's file is its first) and sees the same checkpoint directory.
std::unique_ptr<DirectoryLock> open_directory(const Communicator& comm, const RunOptions& options) {
  check_local_directories(comm, options);
  auto lock = lock_directory(comm, options);
  check_shared_directory(comm, options.checkpoint_dir, options.save_timeout,
                         options.directory_lock);
  remove_crashed_checks_probes(comm, options);
  return lock;
}

// What the command line checks of the checkpointing options (run_option_checks.cpp), for a
// program that sets them itself: every rank refuses the same options alike, before anything
// collective.
void check_manager_options(const RunOptions& options) {
  if (options.checkpoint_dir.empty()) {
    throw UsageError("the checkpoint manager needs a checkpoint directory");
  }
  validate(options.retention);
  const auto count = [](const char* what, std::int64_t value, std::int64_t least) {
    if (value < least || value > 1'000'000'000) {
      throw UsageError(std::string(what) + " must be a whole number from " + std::to_string(least) +
                       " to 1000000000, got " + std::to_string(value));
    }
  };
  count("flush_every", options.flush_every, options.flush_interval_seconds ? 0 : 1);
  count("local_keep", options.local_keep, 1);
  if (const auto interval = options.flush_interval_seconds;
      interval && !(std::isfinite(*interval) && *interval > 0 && *interval <= 1e9)) {
    throw UsageError("flush_interval must be a number of seconds more than 0 and at most 1e9");
  }
  if (!(options.save_timeout.count() > 0 && options.save_timeout.count() <= 1e9)) {
    throw UsageError("save_timeout must be a number of seconds more than 0 and at most 1e9");
  }
  if (options.async_max_staging_bytes && !options.async_checkpoint) {
    throw UsageError("a staging limit needs asynchronous saves");
  }
  const bool levels = options.flush_every != 1 || options.flush_interval_seconds ||
                      options.local_keep != 1 || options.local_redundancy != "none";
  if (options.local_dir.empty()) {
    if (levels) {
      throw UsageError(
          "flush_every, flush_interval, local_keep and local_redundancy need a node-local "
          "directory (local_dir)");
    }
    return;
  }
  if ((options.local_dir / "").lexically_normal() ==
      (options.checkpoint_dir / "").lexically_normal()) {
    throw UsageError("the node-local directory '" + options.local_dir.string() +
                     "' is the checkpoint directory itself: give a node-local directory");
  }
  parse_local_redundancy(options.local_redundancy);
}

SaveResult result_of(const SaveOutcome& outcome) {
  return SaveResult{outcome.epoch,           outcome.committed, outcome.node_local,
                    outcome.in_background,   outcome.failure,   outcome.seconds,
                    outcome.blocked_seconds, outcome.bytes};
}

std::vector<std::string> node_names_of(const Communicator& comm) {
  std::vector<std::string> names;
  for (int rank = 0; rank < comm.size(); ++rank) {
    names.push_back(Job::node_name(rank));
  }
  return names;
}

}  // namespace

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

CheckpointManager::Impl::Impl(const Job& declared, const Communicator& on,
                              const RunOptions& run_options,
                              std::chrono::system_clock::time_point started)
    : arrays(declared),
      comm(on),
      options(run_options),
      node_names(node_names_of(comm)),
      lock(open_directory(comm, options)),
      checkpointing(checkpoint_options(options)),
      post_commit(comm, checkpointing, arrays.name()),
      saver(arrays.name(), comm, checkpointing, node_names, post_commit),
      metrics(comm, options.checkpoint_dir, started) {}

std::optional<Resumed> CheckpointManager::Impl::restore(const ResumeRequest& request,
                                                        Workspace& workspace, RunSummary& into) {
  auto resume_options = options;
  resume_options.resume = request;
  auto resumed =
      resume(arrays, comm, resume_options, node_names, post_commit.index(), workspace, into);
  if (resumed) {
    metrics.load(resumed->epoch, resumed->seconds, resumed->bytes);
    save_arrays(resumed->blobs);
    saver.resumed_from(resumed->epoch, resumed->node_local);
  }
  return resumed;
}

void CheckpointManager::Impl::save_arrays(const std::vector<std::string>& names) {
  saver.set_blobs(blob_plans(arrays, comm, names));
  saved_names = names;
}

CheckpointManager::CheckpointManager(const Job& arrays, const Communicator& comm,
                                     const RunOptions& options)
    : comm_(comm.duplicate()) {
  check_manager_options(options);
  check_global_arrays(arrays, comm_, options.save_timeout);
  impl_ = std::make_unique<Impl>(arrays, comm_, options, std::chrono::system_clock::now());
}

CheckpointManager::~CheckpointManager() {
  if (std::uncaught_exceptions() == 0) {
    try {
      wait();
      impl_->post_commit.wait_for_the_index();
    } catch (const std::exception& error) {
      spdlog::warn("the checkpoint manager's save in flight was not committed: {}", error.what());
    }
  }
}

void CheckpointManager::create(Workspace& workspace) const {
  for (const auto& spec : impl_->arrays.expected_blobs()) {
    workspace.put(spec.name, spec.created(comm_.rank(), comm_.size()));
  }
}

std::optional<Restored> CheckpointManager::restore(const ResumeRequest& request,
                                                   Workspace& workspace) {
  wait();
  auto resumed = impl_->restore(request, workspace, impl_->summary);
  if (!resumed) {
    return std::nullopt;
  }
  return Restored{resumed->epoch, resumed->written_by_ranks, resumed->node_local, resumed->blobs};
}

SaveResult CheckpointManager::save(std::int64_t epoch, const Workspace& workspace, bool last) {
  wait();
  if (impl_->saved_names != workspace.names()) {
    impl_->save_arrays(workspace.names());
  }
  const auto outcome = impl_->saver.save(epoch, workspace, !last);
  if (!outcome.in_background) {
    impl_->metrics.save(outcome);
  }
  return result_of(outcome);
}

std::optional<SaveResult> CheckpointManager::wait() {
  auto outcome = impl_->saver.complete();
  for (const auto& exchange : impl_->saver.take_settled_exchanges()) {
    impl_->metrics.redundancy(exchange.epoch, exchange.seconds);
  }
  if (!outcome) {
    return std::nullopt;
  }
  impl_->metrics.save(*outcome);
  return result_of(*outcome);
}

std::optional<std::int64_t> CheckpointManager::latest() const {
  return impl_->post_commit.latest();
}

}  // namespace epochrun
