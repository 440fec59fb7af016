#include "kmeans_job.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include <epochrun/errors.hpp>

namespace kmeans {
namespace {

// Uniform in [0, 1), the same on every platform (std's distributions are not).
double unit(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

// `count` points (row-major, `dimensions` each) of rank `rank`: blobs around `clusters` centres
// that depend on the seed alone, so that every rank draws from the same clusters.
std::vector<double> generate_points(const Options& o, int rank, std::int64_t count) {
  const auto k = static_cast<std::size_t>(o.clusters);
  const auto dim = static_cast<std::size_t>(o.dimensions);
  std::mt19937_64 centre_generator(static_cast<std::uint64_t>(o.seed));
  std::vector<double> centres(k * dim);
  for (auto& x : centres) {
    x = 20 * unit(centre_generator) - 10;
  }
  std::seed_seq seeds{static_cast<std::uint64_t>(o.seed), static_cast<std::uint64_t>(rank)};
  std::mt19937_64 generator(seeds);
  std::vector<double> points(static_cast<std::size_t>(count) * dim);
  for (std::size_t p = 0; p < static_cast<std::size_t>(count); ++p) {
    const auto centre = generator() % k;
    for (std::size_t d = 0; d < dim; ++d) {
      points[p * dim + d] = centres[centre * dim + d] + unit(generator) + unit(generator) - 1;
    }
  }
  return points;
}

std::size_t nearest(std::span<const double> centroids, const double* point, std::size_t dim) {
  std::size_t best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c * dim < centroids.size(); ++c) {
    double distance = 0;
    for (std::size_t d = 0; d < dim; ++d) {
      const double delta = point[d] - centroids[c * dim + d];
      distance += delta * delta;
    }
    if (distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

void validate(const Options& o) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) {
      throw epochrun::UsageError("kmeans." + what);
    }
  };
  require(o.clusters >= 1 && o.clusters <= 1000, "clusters must be in [1, 1000]");
  require(o.dimensions >= 1 && o.dimensions <= 1000, "dimensions must be in [1, 1000]");
  require(o.points_per_rank >= o.clusters && o.points_per_rank <= 100'000'000,
          "points_per_rank must be in [clusters, 100000000]");
  require(o.max_iterations >= 1, "max_iterations must be at least 1");
  require(std::isfinite(o.tolerance) && o.tolerance >= 0, "tolerance must be at least 0");
}

void declare_options(epochrun::JobOptions& options, Options& o) {
  options.add("clusters", &o.clusters, "k, the number of centroids");
  options.add("dimensions", &o.dimensions, "coordinates per point");
  options.add("points_per_rank", &o.points_per_rank, "points each rank generates");
  options.add("seed", &o.seed, "seed of the points (with the rank) and of the cluster centres");
  options.add("max_iterations", &o.max_iterations, "stop after this many iterations");
  options.add("tolerance", &o.tolerance,
              "stop once no centroid coordinate moved by more than this (0: not at all)");
}

}  // namespace

epochrun::Job make_job(const Options& o) {
  validate(o);
  const auto k = static_cast<std::size_t>(o.clusters);
  const auto dim = static_cast<std::size_t>(o.dimensions);
  epochrun::Job job("kmeans");
  // The checkpointed state: the centroids, the iteration counter and the last move.
  const auto centroids = job.blob<double>("centroids", {k, dim}, {.output = true});
  const auto iteration = job.scalar<std::int64_t>("iteration", 0, {.output = true});
  const auto shift = job.scalar<double>("shift", std::numeric_limits<double>::infinity());

  // The first `clusters` points of rank 0 are the initial centroids, on every rank alike.
  job.init_group.add("initial_centroids", [=](epochrun::TaskContext& context) {
    std::ranges::copy(generate_points(o, 0, o.clusters), centroids.of(context).begin());
  });

  // Generated at the first iteration of each run, from scratch or resumed alike.
  auto points = std::make_shared<std::vector<double>>();
  job.epoch_group.add("lloyd_iteration", [=](epochrun::TaskContext& context) {
    if (points->empty()) {
      *points = generate_points(o, context.comm.rank(), o.points_per_rank);
    }
    const auto current = centroids.of(context);
    // Per cluster: the coordinate sums, then the point counts (exact in a double up to 2^53).
    std::vector<double> sums(k * dim + k, 0.0);
    for (std::size_t p = 0; p * dim < points->size(); ++p) {
      const double* point = points->data() + p * dim;
      const auto c = nearest(current, point, dim);
      for (std::size_t d = 0; d < dim; ++d) {
        sums[c * dim + d] += point[d];
      }
      sums[k * dim + c] += 1;
    }
    context.comm.allreduce(std::span<double>(sums), epochrun::Reduction::kSum);
    double moved = 0;
    for (std::size_t c = 0; c < k; ++c) {
      const double count = sums[k * dim + c];
      for (std::size_t d = 0; d < dim && count > 0; ++d) {  // an empty cluster stays put
        const double mean = sums[c * dim + d] / count;
        moved = std::max(moved, std::abs(mean - current[c * dim + d]));
        current[c * dim + d] = mean;
      }
    }
    shift.of(context) = moved;
    ++iteration.of(context);
  });

  job.add_stop_condition("converged", [=, tolerance = o.tolerance](const epochrun::Workspace& ws) {
    return shift.of(ws) <= tolerance;
  });
  job.add_stop_condition("iteration_limit",
                         [=, limit = o.max_iterations](const epochrun::Workspace& ws) {
                           return iteration.of(ws) >= limit;
                         });
  // The data; max_iterations and tolerance may change on resume.
  for (const char* key : {"clusters", "dimensions", "points_per_rank", "seed"}) {
    job.declare_run_defining_option(key);
  }
  return job;
}

void register_job(epochrun::JobRegistry& registry) {
  registry.add({"kmeans", "distributed k-means: points generated per rank from a seed",
                epochrun::with_options<Options>(declare_options, make_job)});
}

}  // namespace kmeans
