#include "local_level.hpp"

#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"
#include "host_name.hpp"
#include "local_manifest.hpp"
#include "local_redundancy.hpp"
#include "local_redundancy_file.hpp"
#include "mpi_thread_level.hpp"
#include "seconds_since.hpp"

namespace epochrun {
namespace {

// A failed exchange: the epoch's copies are there and it is still saved, unprotected. `say`: on
// the rank that speaks for the others (rank 0 when every rank failed alike). What the exchange
// left of the epoch's redundancy files goes.
void leave_unprotected(const std::filesystem::path& local_dir, std::int64_t epoch,
                       const std::string& why, bool say) {
  if (say) {
    spdlog::warn(
        "node-local epoch {} is not protected across hosts ({}): the loss of a host costs it",
        epoch, why);
  }
  remove_redundancy_files(local_dir, [&](std::int64_t other) { return other != epoch; });
}

}  // namespace

LocalLevel::LocalLevel(std::string job, const Communicator& comm, const CheckpointOptions& options)
    : job_(std::move(job)), comm_(comm), options_(options) {
  // What --local-redundancy cannot protect on these hosts, said once at the start (one host:
  // nothing).
  if (!options_.local_dir.empty() && !options_.local_redundancy.none()) {
    const auto warning = redundancy_warning(comm_, options_.local_redundancy);
    if (!warning.empty() && comm_.is_root()) {
      spdlog::warn("{}", warning);
    }
    // Agreed: every rank exchanges in the background or none does.
    if (options_.async_checkpoint && !options_.checkpoint_dir.empty() &&
        comm_.allreduce_max(mpi_calls_from_any_thread() ? 0.0 : 1.0) == 0.0) {
      exchange_comm_ = comm_.duplicate();
    }
  }
}

LocalLevel::~LocalLevel() {
  settle();
  if (exchange_.joinable()) {
    {
      const std::lock_guard lock(exchange_mutex_);
      exchange_stopping_ = true;
    }
    exchange_wake_.notify_all();
    exchange_.join();
  }
  // The spare serves this run's next copy only: a run that ended leaves the node-local file
  // system (often memory) its --local-keep copies alone.
  if (!options_.local_dir.empty()) {
    ::unlink(local_spare_file(options_.local_dir, comm_.rank()).c_str());
  }
}

void LocalLevel::settle() {
  if (!exchanging_) {
    return;
  }
  std::unique_lock lock(exchange_mutex_);
  exchange_wake_.wait(lock, [&] { return !exchange_task_; });
  settled_.push_back({*exchanging_, exchange_seconds_});
  if (exchange_protected_) {
    // The epoch protected before this one goes at the next write_copies, when no flush is in
    // flight: here one may be, whose copy retention would take for an older epoch's.
    protect(*exchanging_);
    prune_ = true;
  }
  exchanging_.reset();
}

void LocalLevel::protect(std::int64_t epoch) {
  if (!protected_ || epoch > *protected_) {
    protected_ = epoch;
  }
}

std::vector<LocalLevel::SettledExchange> LocalLevel::take_settled_exchanges() {
  return std::exchange(settled_, {});
}

void LocalLevel::run_exchanges() {
  std::unique_lock lock(exchange_mutex_);
  while (true) {
    exchange_wake_.wait(lock, [&] { return exchange_task_ || exchange_stopping_; });
    if (!exchange_task_) {
      return;
    }
    auto manifest = *exchange_task_;
    lock.unlock();
    const auto started = std::chrono::steady_clock::now();
    const bool stored = protect_in_background(std::move(manifest));
    const double took = seconds_since(started);
    lock.lock();
    exchange_seconds_ = took;
    exchange_protected_ = stored;
    exchange_task_.reset();
    exchange_wake_.notify_all();
  }
}

std::optional<LocalCopyRecord> LocalLevel::write_copies(std::int64_t epoch,
                                                        const std::vector<SavedBlob>& blobs,
                                                        const std::function<void()>& then) {
  settle();
  if (std::exchange(prune_, false)) {
    // The epoch the settled exchange protected stands for the one protected before it, whose
    // copy becomes the spare this copy is written over.
    retain();
  }
  std::optional<LocalCopyRecord> record;
  try {
    run_then_agree_within(comm_, "save epoch " + std::to_string(epoch) + ": node-local copy",
                          options_.save_timeout, [&] {
                            try {
                              record = write_local_copy(options_.local_dir, job_, epoch,
                                                        comm_.rank(), comm_.size(), blobs);
                              if (then) {
                                then();
                              }
                            } catch (const std::exception& error) {
                              throw Error("rank " + std::to_string(comm_.rank()) + " on " +
                                          host_name() + ": " + error.what());
                            }
                          });
    return record;
  } catch (const std::exception& error) {
    failed_ = true;
    if (comm_.is_root()) {
      spdlog::warn(
          "the node-local file system of --local-dir {} failed ({}): every checkpoint is flushed "
          "to the checkpoint directory from now on, without node-local copies; the job goes on",
          options_.local_dir.string(), error.what());
    }
    std::vector<std::int64_t> keep(kept_.begin(), kept_.end());
    if (protected_) {
      keep.push_back(*protected_);
    }
    remove_local_copies(options_.local_dir, comm_.rank(), comm_.size(), keep, SpareCopy::kDelete);
    return std::nullopt;
  }
}

bool LocalLevel::save(std::int64_t epoch, const std::vector<SavedBlob>& blobs, SavePhases& phases) {
  std::optional<LocalCopyRecord> record;
  {
    const PhaseTimer timer(phases, SavePhase::kSnapshot);
    record = write_copies(epoch, blobs);
    if (!record) {
      return false;
    }
  }
  commit_copies(epoch, *record, phases);
  kept(epoch);
  manifested_.push_back(epoch);
  return true;
}

void LocalLevel::commit_while_flushed(std::int64_t epoch, const LocalCopyRecord& record,
                                      SavePhases& phases) {
  if (options_.flush.flushes_every_checkpoint()) {
    return;
  }
  commit_copies(epoch, record, phases);
  // Not kept yet: kept() once the flush commits (which makes the manifest redundant: the next
  // retain deletes it), never when the flush fails (the retain deletes copies and manifest).
  manifested_.push_back(epoch);
}

void LocalLevel::commit_copies(std::int64_t epoch, const LocalCopyRecord& record,
                               SavePhases& phases) {
  if (exchange_comm_) {
    // The copies are complete and agreed: the epoch is saved now, unprotected, and protected
    // in the background while the job goes on.
    LocalManifest manifest;
    {
      const PhaseTimer timer(phases, SavePhase::kCommit);
      manifest = commit_manifest(epoch, record, "none");
    }
    exchanging_ = epoch;
    {
      const std::lock_guard lock(exchange_mutex_);
      exchange_task_ = std::move(manifest);
    }
    exchange_wake_.notify_all();
    if (!exchange_.joinable()) {
      exchange_ = std::thread([this] { run_exchanges(); });
    }
    return;
  }
  std::string redundancy;
  {
    const PhaseTimer timer(phases, SavePhase::kRedundancy);
    redundancy = store_redundancy(epoch, comm_);
  }
  const PhaseTimer timer(phases, SavePhase::kCommit);
  commit_manifest(epoch, record, redundancy);
  if (redundancy != "none") {
    protect(epoch);
  }
}

bool LocalLevel::protect_in_background(LocalManifest manifest) {
  const auto epoch = manifest.epoch;
  const auto& on = *exchange_comm_;
  try {
    const auto redundancy = store_redundancy(epoch, on);
    if (redundancy == "none") {
      return false;
    }
    // store_redundancy agreed on every rank's files, complete under their names: only now may
    // the manifest say what protects the epoch. A manifest not rewritten keeps saying "none",
    // which is true. Agreed, so that every rank knows which epoch its manifest protects
    // (retention keeps the newest one).
    manifest.redundancy = redundancy;
    run_on_root_then_agree_within(on, "node-local epoch " + std::to_string(epoch) + ": manifest",
                                  options_.save_timeout,
                                  [&] { write_local_manifest(options_.checkpoint_dir, manifest); });
    return true;
  } catch (const std::exception& error) {
    // A bounded agreement that ran out (store_redundancy rethrows it: not every rank may know),
    // or rank 0's rewrite of the manifest: the epoch stays saved and unprotected, as its
    // manifest says; each rank that saw it says so.
    leave_unprotected(options_.local_dir, epoch, error.what(), true);
    return false;
  }
}

std::string LocalLevel::store_redundancy(std::int64_t epoch, const Communicator& on) {
  // --local-redundancy none: the copies are on their own hosts alone; a lost host loses the
  // epoch, and a restart falls back to the newest flushed checkpoint.
  if (options_.local_redundancy.none()) {
    return "none";
  }
  try {
    fault_point("save-redundancy", epoch);
    const auto stats =
        protect_local_copies(options_.local_dir, epoch, on, options_.local_redundancy,
                             RedundancyCall{options_.save_timeout, ""});
    if (on.is_root()) {
      spdlog::debug("node-local epoch {} protected ({}) in {:.3f} s, {} sent by rank 0", epoch,
                    local_redundancy_name(options_.local_redundancy), stats.seconds,
                    stats.bytes_sent);
    }
    return local_redundancy_name(options_.local_redundancy);
  } catch (const AgreementTimeout&) {
    throw;
  } catch (const std::exception& error) {
    // The same on every rank.
    leave_unprotected(options_.local_dir, epoch, error.what(), on.is_root());
    return "none";
  }
}

LocalManifest LocalLevel::commit_manifest(std::int64_t epoch, const LocalCopyRecord& record,
                                          const std::string& redundancy) {
  const auto context = "save epoch " + std::to_string(epoch) + ": node-local manifest";
  // Agreed: a copy gone since the ranks agreed on it (deleted or renamed by another run that
  // shares --local-dir, against the advice) fails the commit on every rank. A rank that failed
  // alone went on to its next epoch out of step with the others' collective calls: they waited
  // for its part until --save-timeout, or for good.
  std::string text;
  run_then_agree_within(comm_, context, options_.save_timeout, [&] {
    const auto file = local_copy_file(options_.local_dir, epoch, comm_.rank());
    struct stat status {};
    if (::stat(file.c_str(), &status) != 0) {
      throw Error(errno_message("the node-local copy " + file.string() + " on " + host_name()));
    }
    std::ostringstream part;
    part << local_copy_record_xxh64(record) << ' ' << status.st_size << ' ' << record.host;
    text = part.str();
  });
  const auto gathered = comm_.gather(std::as_bytes(std::span(text.data(), text.size())));
  LocalManifest manifest{job_, epoch, comm_.size(), redundancy, options_.config_json, {}};
  run_on_root_then_agree_within(comm_, context, options_.save_timeout, [&] {
    for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
      std::istringstream in(
          std::string(reinterpret_cast<const char*>(gathered[rank].data()), gathered[rank].size()));
      LocalPart described{static_cast<int>(rank), {}, 0, 0};
      in >> described.record_xxh64 >> described.file_bytes >> std::ws;
      std::getline(in, described.host);
      manifest.parts.push_back(std::move(described));
    }
    write_local_manifest(options_.checkpoint_dir, manifest);
  });
  return manifest;
}

void LocalLevel::kept(std::int64_t epoch) {
  kept_.erase(std::remove(kept_.begin(), kept_.end(), epoch), kept_.end());
  // A flushed epoch's copies stand for the flushed file, not for a manifest of another run's.
  manifested_.erase(std::remove(manifested_.begin(), manifested_.end(), epoch), manifested_.end());
  kept_.push_back(epoch);
  std::sort(kept_.begin(), kept_.end());
  while (kept_.size() > static_cast<std::size_t>(std::max<std::int64_t>(options_.local_keep, 1))) {
    kept_.pop_front();
  }
  std::erase_if(manifested_, [&](std::int64_t manifested) {
    return manifested != protected_ &&
           std::find(kept_.begin(), kept_.end(), manifested) == kept_.end();
  });
}

void LocalLevel::retain(std::optional<std::int64_t> flushing) {
  if (options_.local_dir.empty()) {
    return;
  }
  std::vector<std::int64_t> keep(kept_.begin(), kept_.end());
  if (flushing) {
    keep.push_back(*flushing);
  }
  remove(keep, SpareCopy::kKeep);
}

void LocalLevel::resumed(std::int64_t epoch, bool node_local) {
  settle();
  kept_.assign(1, epoch);
  manifested_.clear();
  protected_.reset();
  prune_ = false;
  if (node_local) {
    manifested_.push_back(epoch);
    // What protects the epoch is its manifest's to say, which a resume does not hand on: taken
    // as protected when the run protects its epochs, so that it stays until a newer one is.
    if (!options_.local_redundancy.none()) {
      protected_ = epoch;
    }
  }
}

void LocalLevel::delete_all() {
  if (options_.local_dir.empty()) {
    return;
  }
  settle();
  kept_.clear();
  manifested_.clear();
  protected_.reset();
  prune_ = false;
  remove({}, SpareCopy::kDelete);
}

void LocalLevel::flushed() {
  // kept_ is frozen once the level failed: empty when it held nothing, or after this ran once.
  if (failed_ && !kept_.empty()) {
    delete_all();
    return;
  }
  // A committed flush is the newest epoch (the saver commits the save in flight before it saves
  // another), and a lost host costs it nothing: no node-local epoch need stand in for it.
  protected_.reset();
}

void LocalLevel::remove(std::vector<std::int64_t> keep, SpareCopy spare) {
  // The epoch whose exchange is in flight: its files and manifest are the background's until
  // it settles.
  if (exchanging_) {
    keep.push_back(*exchanging_);
  }
  // The newest protected epoch, until a newer one is protected or flushed: what a lost host
  // resumes from meanwhile.
  if (protected_) {
    keep.push_back(*protected_);
  }
  std::vector<std::int64_t> manifests;
  for (const auto epoch : keep) {
    if (std::find(manifested_.begin(), manifested_.end(), epoch) != manifested_.end()) {
      manifests.push_back(epoch);
    }
  }
  if (comm_.is_root() && !options_.checkpoint_dir.empty() &&
      remove_local_manifests(options_.checkpoint_dir, manifests, exchanging_) > 0) {
    spdlog::warn("some node-local epochs' manifests in {} could not be deleted",
                 options_.checkpoint_dir.string());
  }
  // Whoever wrote them: the ranks of a restart on other hosts inherit the redundancy files
  // of the ranks before them.
  remove_redundancy_files(options_.local_dir, [&](std::int64_t epoch) {
    return std::find(keep.begin(), keep.end(), epoch) != keep.end();
  });
  if (remove_local_copies(options_.local_dir, comm_.rank(), comm_.size(), keep, spare) > 0) {
    spdlog::warn("some node-local copies in {} could not be deleted", options_.local_dir.string());
  }
}

}  // namespace epochrun
