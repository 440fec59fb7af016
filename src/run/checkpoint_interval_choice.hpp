// The checkpoint interval that minimises the expected lost work for a given failure rate
// (--mtbf HOURS, for the whole allocation): Young's first-order sqrt(2 C M) with Daly's
// higher-order correction (J. T. Daly, "A higher order estimate of the optimum checkpoint
// interval for restart dumps", FGCS 22, 2006), from the checkpoint cost C this run measures: what
// its first save cost the job (the slowest rank's time stopped in it). Rank 0 prints it once;
// with --checkpoint-every auto the run checkpoints by that interval from then on.
#pragma once

#include <optional>

#include "epochrun/communicator.hpp"

namespace epochrun {

struct SaveOutcome;

// Daly's interval (seconds of work between checkpoints) for a checkpoint of `checkpoint_seconds`
// and a mean time between failures of `mtbf_seconds`: sqrt(2 C M) [1 + sqrt(C / 2M) / 3 +
// (C / 2M) / 9] - C while C < 2M, M otherwise.
double daly_interval(double checkpoint_seconds, double mtbf_seconds);

class CheckpointIntervalChoice {
 public:
  explicit CheckpointIntervalChoice(std::optional<double> mtbf_seconds)
      : mtbf_seconds_(mtbf_seconds) {}

  // Collective, after every save: the first one measures the cost and chooses (rank 0 says so
  // in one line); returns the interval then, nothing before and after, or without --mtbf.
  std::optional<double> after_save(const SaveOutcome& save, const Communicator& comm);

 private:
  std::optional<double> mtbf_seconds_;
  bool chosen_ = false;
};

}  // namespace epochrun
