#include "epochrun/epoch_limiter.hpp"

#include "epochrun/errors.hpp"

namespace epochrun {

void add_epoch_limiter(Job& job, std::int64_t num_epochs) {
  if (num_epochs < 1) {
    throw UsageError("epoch limit must be at least 1, got " + std::to_string(num_epochs));
  }
  job.init_group.add("epoch_limiter_init", [num_epochs](TaskContext& context) {
    context.workspace.put(kEpochsRemainingBlob, Blob::scalar<std::int64_t>(num_epochs));
  });
  job.epoch_group.add("epoch_limiter_countdown", [](TaskContext& context) {
    auto& remaining = context.workspace.get(kEpochsRemainingBlob).item<std::int64_t>();
    if (remaining > 0) {
      --remaining;
    }
  });
  job.add_stop_condition("epoch_limit", [](const Workspace& workspace) {
    return workspace.get(kEpochsRemainingBlob).item<std::int64_t>() <= 0;
  });
}

}  // namespace epochrun
