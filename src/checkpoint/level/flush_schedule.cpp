#include "flush_schedule.hpp"

namespace epochrun {

bool FlushSchedule::due(Clock::time_point now) const {
  if (!started_ || options_.flushes_every_checkpoint()) {
    return true;
  }
  if (options_.every > 0 && node_local_since_flush_ + 1 >= options_.every) {
    return true;
  }
  return options_.interval_seconds &&
         std::chrono::duration<double>(now - last_flush_).count() >= *options_.interval_seconds;
}

void FlushSchedule::saved(bool flushed, Clock::time_point now) {
  started_ = true;
  if (flushed) {
    node_local_since_flush_ = 0;
    last_flush_ = now;
  } else {
    ++node_local_since_flush_;
  }
}

void FlushSchedule::resumed(Clock::time_point now, bool flushed) {
  started_ = flushed;
  node_local_since_flush_ = 0;
  last_flush_ = now;
}

}  // namespace epochrun
