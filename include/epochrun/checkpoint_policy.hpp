// Which epochs get a checkpoint: every Nth epoch, or once a wall-time interval has passed since
// the last committed one (Orbax's save_interval_steps, Keras' save_freq). Whatever it says,
// init (epoch 0), the epoch the loop stops after, a preemption and a time-limit stop are
// always checkpointed (the runner sees to that).
#pragma once

#include <cstdint>
#include <optional>

#include "epochrun/export.hpp"

namespace epochrun {

struct EPOCHRUN_API CheckpointPolicy {
  // --checkpoint-every N: epochs divisible by N. Unset: every epoch, unless an interval is set.
  std::optional<std::int64_t> every;
  // --checkpoint-interval S: an epoch that ends S seconds or more after the last commit.
  std::optional<double> interval_seconds;

  // Whether `epoch` is checkpointed, `seconds_since_commit` after the last committed one.
  bool due(std::int64_t epoch, double seconds_since_commit) const;
  // For the log: why an epoch was not checkpointed ("--checkpoint-every 5").
  const char* skip_reason() const;
};

// Throws UsageError unless N is at least 1 and S is finite and more than 0.
EPOCHRUN_API void validate(const CheckpointPolicy& policy);

}  // namespace epochrun
