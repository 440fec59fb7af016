#include "slurm_environment.hpp"

#include <cstdlib>

namespace epochrun {

SlurmEnvironment SlurmEnvironment::of_this_process() {
  SlurmEnvironment environment;
  if (const char* id = std::getenv("SLURM_JOB_ID"); id != nullptr && *id != '\0') {
    environment.job_id = id;
  }
  if (const char* count = std::getenv("SLURM_RESTART_COUNT")) {
    char* end = nullptr;
    const long long value = std::strtoll(count, &end, 10);
    environment.restart_count = (end != count && *end == '\0' && value >= 0) ? value : 0;
  }
  return environment;
}

}  // namespace epochrun
