// The node-local level as a level of a save (checkpoint_level.hpp): every rank's copy of a
// checkpoint in --local-dir, and which checkpoints go no further (the flush schedule of
// --flush-every and --flush-interval). A checkpoint routed node-local only is committed by its
// manifest in begin (LocalLevel::save); one that is flushed is written to the copies in begin,
// and the shared file is written from them (the views begin returns). The level's own
// finish-later step is the background redundancy exchange of an asynchronous run, which its
// commit waits for. Internal to the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_level.hpp"
#include "checkpoint_options.hpp"
#include "epochrun/communicator.hpp"
#include "flush_schedule.hpp"
#include "local_copy.hpp"
#include "local_level.hpp"

namespace epochrun {

class NodeLocalLevel final : public CheckpointLevel {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective (LocalLevel's constructor).
  NodeLocalLevel(std::string job, const Communicator& comm, const CheckpointOptions& options);

  // Whether checkpoints go through node-local copies: --local-dir given and its file system has
  // not failed in this run.
  bool active() const { return level_.active(); }
  // Agreed on every rank: whether the checkpoint begun at `now` is flushed to the shared file.
  bool flush_due(Clock::time_point now) const;
  // A checkpoint begun at `now` was routed to the shared file (`flushed`) or saved node-local
  // only: the flush schedule counts from it.
  void saved(bool flushed, Clock::time_point now) { schedule_.saved(flushed, now); }
  // The run resumed at `now` from `epoch`, loaded from its node-local copies and manifest when
  // `node_local`.
  void resumed(std::int64_t epoch, bool node_local, Clock::time_point now);

  std::optional<std::vector<SavedBlob>> begin(std::int64_t epoch, std::vector<SavedBlob> blobs,
                                              const SaveRoute& route,
                                              SaveOutcome& outcome) override;
  // Nothing: the background exchange is started by the level's commit of the epoch.
  void finish(bool later) override;
  // Waits for the background redundancy exchange in flight, if any (LocalLevel::settle).
  void commit(SaveOutcome& outcome) override;
  // Counts a flushed checkpoint's copies as kept when it committed, and applies --local-keep.
  void done(bool committed) override;

  // A checkpoint committed to the checkpoint directory (LocalLevel::flushed).
  void flushed() { level_.flushed(); }
  // Deletes this rank's node-local copies (LocalLevel::delete_all).
  void delete_all() { level_.delete_all(); }
  std::vector<LocalLevel::SettledExchange> take_settled_exchanges() {
    return level_.take_settled_exchanges();
  }

 private:
  const Communicator& comm_;
  const CheckpointOptions& options_;
  LocalLevel level_;
  FlushSchedule schedule_;
  std::optional<MappedLocalCopy> mapped_;  // the copy the shared file in flight is written from
};

}  // namespace epochrun
