// Which checkpoints a run with node-local copies (--local-dir) flushes to the checkpoint
// directory (--flush-every N, --flush-interval SECONDS): the run's first checkpoint unless it
// resumed from a flushed one, then the Nth after the last flushed one, or the first one S seconds
// or more after the last flush began, whichever comes first; the others stay node-local. (The last
// checkpoint of a run and the one a stop takes are always flushed: the saver's caller says
// so.) Without either option every checkpoint is flushed. Internal to the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "checkpoint_options.hpp"

namespace epochrun {

class FlushSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FlushSchedule(FlushOptions options) : options_(options) {}

  // Whether the next checkpoint, saved at `now`, is due to be flushed. The same on every rank
  // by count; by time each rank's own clock (the saver agrees on it).
  bool due(Clock::time_point now) const;
  // A checkpoint was saved at `now`: flushed or node-local only.
  void saved(bool flushed, Clock::time_point now);
  // The run resumed at `now` from a checkpoint: counting starts from it when it was `flushed`.
  // A node-local one lies an unknown number of checkpoints after the last flush (its copies may
  // be all that is left of those before it), and a lost host would cost them all and the new
  // ones: the next checkpoint is flushed, as a run's first is.
  void resumed(Clock::time_point now, bool flushed);

  const FlushOptions& options() const { return options_; }

 private:
  FlushOptions options_;
  bool started_ = false;  // a checkpoint was saved or resumed from
  std::int64_t node_local_since_flush_ = 0;
  Clock::time_point last_flush_ = Clock::now();
};

}  // namespace epochrun
