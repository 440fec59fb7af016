// A distributed k-means (Lloyd's algorithm) job on epochrun. Each rank generates its own
// points from the seed; every epoch is one iteration: assign the local points to the nearest
// centroid, sum them up across ranks, move the centroids to the means. The centroids and the
// iteration counter are the checkpointed state; the points are regenerated, never saved. The
// job stops when no centroid moves by more than `tolerance` or at `max_iterations`.
#pragma once

#include <cstdint>

#include <epochrun/job.hpp>
#include <epochrun/job_registry.hpp>

namespace kmeans {

struct Options {
  std::int64_t clusters = 5;
  std::int64_t dimensions = 3;
  std::int64_t points_per_rank = 20000;
  std::int64_t max_iterations = 100;
  std::int64_t seed = 7;
  double tolerance = 0;  // 0: until the centroids do not move at all
};

epochrun::Job make_job(const Options& options);

// Registers the job "kmeans" (with its options) in `registry`: the program calls it before
// run_main, the job library from its entry point.
void register_job(epochrun::JobRegistry& registry);

}  // namespace kmeans
