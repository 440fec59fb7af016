#include "checkpoint_interval_choice.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "checkpoint_saver.hpp"

namespace epochrun {

double daly_interval(double checkpoint_seconds, double mtbf_seconds) {
  const double c = std::max(checkpoint_seconds, 0.0);
  const double m = mtbf_seconds;
  if (c >= 2 * m) {
    return m;
  }
  const double ratio = c / (2 * m);
  return std::sqrt(2 * c * m) * (1 + std::sqrt(ratio) / 3 + ratio / 9) - c;
}

std::optional<double> CheckpointIntervalChoice::after_save(const SaveOutcome& save,
                                                           const Communicator& comm) {
  if (!mtbf_seconds_ || chosen_ || (!save.committed && !save.node_local && !save.in_background)) {
    return std::nullopt;
  }
  chosen_ = true;
  const double cost = comm.allreduce_max(save.blocked_seconds);
  const double interval = daly_interval(cost, *mtbf_seconds_);
  if (comm.is_root()) {
    spdlog::info(
        "--mtbf {:g} h: a checkpoint costs the job {:.3g} s (epoch {}'s save, the slowest "
        "rank); the Young/Daly checkpoint interval is {:.1f} s (Young's sqrt(2 C M): {:.1f} s)",
        *mtbf_seconds_ / 3600, cost, save.epoch, interval, std::sqrt(2 * cost * *mtbf_seconds_));
  }
  return interval;
}

}  // namespace epochrun
