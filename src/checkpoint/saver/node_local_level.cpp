#include "node_local_level.hpp"

#include <utility>

namespace epochrun {

NodeLocalLevel::NodeLocalLevel(std::string job, const Communicator& comm,
                               const CheckpointOptions& options)
    : comm_(comm),
      options_(options),
      level_(std::move(job), comm, options),
      schedule_(options.flush) {}

bool NodeLocalLevel::flush_due(Clock::time_point now) const {
  const bool due = schedule_.due(now);
  // By count every rank decides alike; by time, each rank's clock: any rank's says so.
  return schedule_.options().interval_seconds ? comm_.any_true(due) : due;
}

void NodeLocalLevel::resumed(std::int64_t epoch, bool node_local, Clock::time_point now) {
  schedule_.resumed(now, !node_local);
  level_.resumed(epoch, node_local);
}

std::optional<std::vector<SavedBlob>> NodeLocalLevel::begin(std::int64_t epoch,
                                                            std::vector<SavedBlob> blobs,
                                                            const SaveRoute& route,
                                                            SaveOutcome& outcome) {
  if (!route.flushed) {
    // Copies, redundancy and manifest: the epoch is committed node-local when this returns.
    if (!level_.save(epoch, blobs, outcome.phases)) {
      return std::nullopt;
    }
    outcome.node_local = true;
    return blobs;
  }
  // The copies, mapped in the same agreement, so that no rank lays out a shared file the others
  // will not write.
  std::vector<SavedBlob> flushed;
  std::optional<LocalCopyRecord> written;
  {
    const PhaseTimer timer(outcome.phases, SavePhase::kSnapshot);
    written = level_.write_copies(epoch, blobs, [&] {
      mapped_.emplace(
          MappedLocalCopy::open(local_copy_file(options_.local_dir, epoch, comm_.rank())));
      flushed = mapped_->flushed(blobs);
    });
  }
  if (!written) {
    mapped_.reset();
    return std::nullopt;
  }
  if (route.later) {
    // Committed node-local while the flush runs. A flush at once (the last checkpoint, one at a
    // stop) has no epoch boundary to wait for, and a stop no time for an exchange.
    level_.commit_while_flushed(epoch, mapped_->record(), outcome.phases);
  }
  return flushed;
}

void NodeLocalLevel::finish(bool /*later*/) {}

void NodeLocalLevel::commit(SaveOutcome& /*outcome*/) {
  level_.settle();
}

void NodeLocalLevel::done(bool committed) {
  if (mapped_ && committed) {
    level_.kept(mapped_->record().epoch);
  }
  mapped_.reset();
  level_.retain();
}

}  // namespace epochrun
