#include "epochrun/epoch_limiter.hpp"

#include <algorithm>

#include "epochrun/errors.hpp"

namespace epochrun {

void add_epoch_limiter(Job& job, std::int64_t num_epochs) {
  if (num_epochs < 1) {
    throw UsageError("epoch limit must be at least 1, got " + std::to_string(num_epochs));
  }
  // The same on every rank: stored once, and loaded by a resume at any rank count.
  job.replicated_scalar<std::int64_t>(kEpochsRemainingBlob, num_epochs);
  // Counted from the epoch number rather than down from the stored value, so that a limit
  // changed on resume (a resubmitted job with more or fewer epochs) applies from the next
  // epoch on; from scratch both give the same values.
  job.epoch_group.add("epoch_limiter_countdown", [num_epochs](TaskContext& context) {
    context.workspace.get(kEpochsRemainingBlob).item<std::int64_t>() =
        std::max<std::int64_t>(num_epochs - context.epoch, 0);
  });
  job.add_stop_condition("epoch_limit", [](const Workspace& workspace) {
    return workspace.get(kEpochsRemainingBlob).item<std::int64_t>() <= 0;
  });
}

}  // namespace epochrun
