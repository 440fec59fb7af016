// What SLURM tells a job step about itself through the environment. Internal to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace epochrun {

struct SlurmEnvironment {
  std::optional<std::string> job_id;  // SLURM_JOB_ID; nullopt outside SLURM
  // SLURM_RESTART_COUNT: how often SLURM requeued this job (0 when unset: the first run).
  std::int64_t restart_count = 0;

  static SlurmEnvironment of_this_process();
};

}  // namespace epochrun
