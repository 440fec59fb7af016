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

constexpr const char* kCentroids = "centroids";  // f64 {clusters, dimensions}
constexpr const char* kIteration = "iteration";  // i64: iterations done
constexpr const char* kShift = "shift";          // f64: how far the last iteration moved a centroid

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

}  // namespace

epochrun::Job make_job(const Options& o) {
  validate(o);
  using epochrun::Blob;
  using epochrun::TaskContext;
  const auto k = static_cast<std::size_t>(o.clusters);
  const auto dim = static_cast<std::size_t>(o.dimensions);
  epochrun::Job job("kmeans");

  // The first `clusters` points of rank 0 are the initial centroids, on every rank alike.
  job.init_group.add("initial_centroids", [o, k, dim](TaskContext& context) {
    const auto first = generate_points(o, 0, o.clusters);
    context.workspace.put(kCentroids, Blob::of<double>({k, dim}, first));
    context.workspace.put(kIteration, Blob::scalar<std::int64_t>(0));
    context.workspace.put(kShift, Blob::scalar(std::numeric_limits<double>::infinity()));
  });

  // Generated at the first iteration of each run, from scratch or resumed alike.
  auto points = std::make_shared<std::vector<double>>();
  job.epoch_group.add("lloyd_iteration", [o, k, dim, points](TaskContext& context) {
    if (points->empty()) {
      *points = generate_points(o, context.comm.rank(), o.points_per_rank);
    }
    auto centroids = context.workspace.get(kCentroids).as<double>();
    // Per cluster: the coordinate sums, then the point counts (exact in a double up to 2^53).
    std::vector<double> sums(k * dim + k, 0.0);
    for (std::size_t p = 0; p * dim < points->size(); ++p) {
      const double* point = points->data() + p * dim;
      const auto c = nearest(centroids, point, dim);
      for (std::size_t d = 0; d < dim; ++d) {
        sums[c * dim + d] += point[d];
      }
      sums[k * dim + c] += 1;
    }
    context.comm.allreduce_sum(sums);
    double shift = 0;
    for (std::size_t c = 0; c < k; ++c) {
      const double count = sums[k * dim + c];
      for (std::size_t d = 0; d < dim && count > 0; ++d) {  // an empty cluster stays put
        const double moved = sums[c * dim + d] / count;
        shift = std::max(shift, std::abs(moved - centroids[c * dim + d]));
        centroids[c * dim + d] = moved;
      }
    }
    context.workspace.get(kShift).item<double>() = shift;
    ++context.workspace.get(kIteration).item<std::int64_t>();
  });

  job.add_stop_condition("converged", [tolerance = o.tolerance](const epochrun::Workspace& ws) {
    return ws.get(kShift).item<double>() <= tolerance;
  });
  job.add_stop_condition("iteration_limit",
                         [limit = o.max_iterations](const epochrun::Workspace& ws) {
                           return ws.get(kIteration).item<std::int64_t>() >= limit;
                         });
  job.expect_blob(kCentroids, epochrun::DType::kF64, {k, dim});
  job.expect_blob(kIteration, epochrun::DType::kI64, {});
  job.expect_blob(kShift, epochrun::DType::kF64, {});
  job.declare_run_defining_option("clusters");
  job.declare_run_defining_option("dimensions");
  job.declare_run_defining_option("points_per_rank");
  job.declare_run_defining_option("seed");
  job.declare_output(kCentroids);
  job.declare_output(kIteration);
  return job;
}

}  // namespace kmeans

namespace kmeans {
namespace {

class Definition : public epochrun::JobDefinition {
 public:
  epochrun::Job build() const override { return make_job(options_); }

 private:
  Options options_;
};

}  // namespace

void register_job(epochrun::JobRegistry& registry) {
  registry.add({"kmeans", "distributed k-means: points generated per rank from a seed",
                [] { return std::make_unique<Definition>(); }});
}

}  // namespace kmeans
