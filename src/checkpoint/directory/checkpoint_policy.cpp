#include "epochrun/checkpoint_policy.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {

bool CheckpointPolicy::due(std::int64_t epoch, double seconds_since_commit) const {
  if (!every && !interval_seconds) {
    return true;
  }
  return (every && epoch % *every == 0) ||
         (interval_seconds && seconds_since_commit >= *interval_seconds);
}

const char* CheckpointPolicy::skip_reason() const {
  if (every && interval_seconds) {
    return "--checkpoint-every, --checkpoint-interval";
  }
  return every ? "--checkpoint-every" : "--checkpoint-interval";
}

void validate(const CheckpointPolicy& policy) {
  if (policy.every && *policy.every < 1) {
    throw UsageError("--checkpoint-every must be at least 1, got " + std::to_string(*policy.every));
  }
  if (policy.interval_seconds &&
      !(std::isfinite(*policy.interval_seconds) && *policy.interval_seconds > 0)) {
    std::ostringstream given;
    given << *policy.interval_seconds;
    throw UsageError(
        "--checkpoint-interval must be a number of seconds more than 0 (or 0: off), "
        "got " +
        given.str());
  }
}

}  // namespace epochrun
