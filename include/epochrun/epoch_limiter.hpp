// The reference's epoch_limiter: a stop condition that holds after a fixed number of epochs,
// counted in the workspace so that it survives a resume.
#pragma once

#include <cstdint>

#include "epochrun/export.hpp"
#include "epochrun/job.hpp"

namespace epochrun {

inline constexpr const char* kEpochsRemainingBlob = "epochs_remaining";

// Adds to `job`: the counter, a replicated scalar starting at `num_epochs`, an epoch task setting
// it to `num_epochs` minus the epoch number (so a limit changed on resume applies), and a stop
// condition "epoch_limit" that holds once `num_epochs` epochs have run.
EPOCHRUN_API void add_epoch_limiter(Job& job, std::int64_t num_epochs);

}  // namespace epochrun
