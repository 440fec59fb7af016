// The kmeans job as a job library for any epochrun program:
//   mpiexec -n 3 epochrun run --job-library ./libkmeans_jobs.so --job kmeans ...
#include <epochrun/job_library.hpp>

#include "kmeans_job.hpp"

EPOCHRUN_JOB_LIBRARY(registry) {
  kmeans::register_job(registry);
}
