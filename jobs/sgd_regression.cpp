#include "sgd_regression.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "epochrun/blob_file.hpp"
#include "epochrun/epoch_limiter.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_registry.hpp"

namespace epochrun::jobs {
namespace {

// SplitMix64 with Box-Muller: tiny, and the same numbers on every platform and standard
// library (std::normal_distribution is implementation-defined), so a shard regenerated after
// a restart is the shard the first run trained on.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double gaussian() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::uint64_t state_;
};

// One rank's training data: row-major features and targets.
struct Shard {
  int rank = -1;
  std::size_t features = 0;
  std::vector<double> x;
  std::vector<double> y;
  std::size_t rows() const { return y.size(); }
};

Shard generate_shard(const SgdRegressionOptions& options, int rank) {
  const auto features = static_cast<std::size_t>(options.features);
  const auto rows = static_cast<std::size_t>(options.samples_per_rank);
  Random truth_random(options.seed);
  std::vector<double> true_weights(features);
  for (auto& weight : true_weights) {
    weight = truth_random.gaussian();
  }
  const double true_bias = truth_random.gaussian();

  Shard shard;
  shard.rank = rank;
  shard.features = features;
  shard.x.resize(rows * features);
  shard.y.resize(rows);
  Random random(options.seed ^ (0x632be59bd9b4e019ULL * static_cast<std::uint64_t>(rank + 1)));
  for (std::size_t row = 0; row < rows; ++row) {
    double target = true_bias;
    for (std::size_t j = 0; j < features; ++j) {
      const double value = random.gaussian();
      shard.x[row * features + j] = value;
      target += value * true_weights[j];
    }
    shard.y[row] = target + options.noise * random.gaussian();
  }
  return shard;
}

// Momentum SGD state, stored in the workspace as opaque bytes (as optimizer state usually is):
// the step count, then one velocity per weight and one for the bias. All zeros is the start.
struct OptimizerState {
  std::uint64_t step = 0;
  std::vector<double> velocity;

  static std::uint64_t byte_size(std::size_t parameters) {
    return sizeof step + parameters * sizeof(double);
  }
  void store(std::span<std::byte> bytes) const {
    std::memcpy(bytes.data(), &step, sizeof step);
    std::memcpy(bytes.data() + sizeof step, velocity.data(), velocity.size() * sizeof(double));
  }
  static OptimizerState load(std::span<const std::byte> bytes, std::size_t parameters) {
    OptimizerState state;
    state.velocity.resize(parameters);
    std::memcpy(&state.step, bytes.data(), sizeof state.step);
    std::memcpy(state.velocity.data(), bytes.data() + sizeof state.step,
                parameters * sizeof(double));
    return state;
  }
};

// The job's checkpointed state, declared once in make_sgd_regression.
struct SgdBlobs {
  BlobHandle<double> weights;
  ScalarHandle<double> bias;
  BytesHandle optimizer_state;
  ScalarHandle<std::int64_t> data_cursor;
  ScalarHandle<double> loss;
};

double prediction_error(const Shard& shard, std::size_t row, std::span<const double> weights,
                        double bias) {
  double value = bias;
  for (std::size_t j = 0; j < shard.features; ++j) {
    value += shard.x[row * shard.features + j] * weights[j];
  }
  return value - shard.y[row];
}

// Mean squared error over every rank's whole shard.
double global_loss(const Shard& shard, std::span<const double> weights, double bias,
                   const Communicator& comm) {
  double sums[2] = {0.0, double(shard.rows())};
  for (std::size_t row = 0; row < shard.rows(); ++row) {
    const double error = prediction_error(shard, row, weights, bias);
    sums[0] += error * error;
  }
  comm.allreduce(std::span(sums), Reduction::kSum);
  return sums[0] / sums[1];
}

void train_one_epoch(const SgdRegressionOptions& options, const SgdBlobs& blobs, const Shard& shard,
                     TaskContext& context) {
  auto weights = blobs.weights.of(context);
  auto& bias = blobs.bias.of(context);
  auto& cursor = blobs.data_cursor.of(context);
  const std::size_t features = shard.features;
  auto state = OptimizerState::load(blobs.optimizer_state.of(context), features + 1);

  // gradient[0..features) for the weights, [features] for the bias, [features + 1] the count.
  std::vector<double> gradient(features + 2);
  for (std::int64_t batch = 0; batch < options.batches_per_epoch; ++batch) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    for (std::int64_t i = 0; i < options.batch_size; ++i) {
      const auto row = static_cast<std::size_t>(cursor) % shard.rows();
      cursor = static_cast<std::int64_t>((row + 1) % shard.rows());
      const double error = prediction_error(shard, row, weights, bias);
      for (std::size_t j = 0; j < features; ++j) {
        gradient[j] += error * shard.x[row * features + j];
      }
      gradient[features] += error;
      gradient[features + 1] += 1.0;
    }
    // Data parallelism: the same step on every rank.
    context.comm.allreduce(std::span(gradient), Reduction::kSum);
    const double count = gradient[features + 1];
    for (std::size_t j = 0; j <= features; ++j) {
      state.velocity[j] = options.momentum * state.velocity[j] + gradient[j] / count;
    }
    for (std::size_t j = 0; j < features; ++j) {
      weights[j] -= options.learning_rate * state.velocity[j];
    }
    bias -= options.learning_rate * state.velocity[features];
    ++state.step;
  }
  state.store(blobs.optimizer_state.of(context));
  const double loss = global_loss(shard, weights, bias, context.comm);
  blobs.loss.of(context) = loss;
  spdlog::info("sgd_regression epoch {}: loss {:.6e} after {} steps", context.epoch, loss,
               state.step);
}

// Rank 0, after the download: every replica must hold the same model, then it is exported.
void export_model(const SgdRegressionOptions& options, const SgdBlobs& blobs,
                  TaskContext& context) {
  if (!context.has_gathered() || options.model_file.empty()) {
    return;
  }
  const auto weights = context.gathered(blobs.weights);
  const auto bias = context.gathered(blobs.bias);
  const auto& [first_node, model] = *weights.begin();
  for (const auto& [node, values] : weights) {
    if (!std::ranges::equal(values, model) || bias.at(node) != bias.at(first_node)) {
      throw Error("data-parallel replicas diverged: " + node + " holds other parameters than " +
                  first_node);
    }
  }
  write_blob_file(options.model_file,
                  {{kSgdWeights, Blob::of(Shape{model.size()}, model)},
                   {kSgdBias, Blob::scalar(bias.at(first_node))}},
                  {{"job", "sgd_regression"},
                   {"epoch", std::to_string(context.epoch)},
                   {"loss", std::to_string(context.gathered(blobs.loss).at(first_node))}});
  spdlog::info("sgd_regression model written to {}", options.model_file);
}

}  // namespace

void validate(const SgdRegressionOptions& options) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) {
      throw UsageError("sgd_regression." + what);
    }
  };
  require(options.features >= 1 && options.features <= 1'000'000,
          "features must be in [1, 1000000]");
  require(options.samples_per_rank >= 1 && options.samples_per_rank <= 100'000'000,
          "samples_per_rank must be in [1, 100000000]");
  require(options.features * options.samples_per_rank <= 500'000'000,
          "features * samples_per_rank must be at most 500000000 (4 GB of data per rank)");
  require(options.batch_size >= 1, "batch_size must be at least 1");
  require(options.batches_per_epoch >= 1, "batches_per_epoch must be at least 1");
  require(std::isfinite(options.learning_rate) && options.learning_rate > 0 &&
              options.learning_rate <= 10,
          "learning_rate must be in (0, 10]");
  require(std::isfinite(options.momentum) && options.momentum >= 0 && options.momentum < 1,
          "momentum must be in [0, 1)");
  require(std::isfinite(options.noise) && options.noise >= 0, "noise must be a finite value >= 0");
  require(options.max_epochs >= 1, "max_epochs must be at least 1");
  require(std::isfinite(options.loss_threshold) && options.loss_threshold >= 0,
          "loss_threshold must be a finite value >= 0");
}

Job make_sgd_regression(const SgdRegressionOptions& options) {
  validate(options);
  Job job("sgd_regression");
  const auto features = static_cast<std::uint64_t>(options.features);
  // Zeros are the start: no weights, no bias, a fresh optimizer; only the loss is unknown.
  const SgdBlobs blobs{
      job.blob<double>(kSgdWeights, {features}, {.output = true}),
      job.scalar<double>(kSgdBias, 0.0, {.output = true}),
      job.bytes(kSgdOptimizerState, OptimizerState::byte_size(features + 1)),
      job.scalar<std::int64_t>(kSgdDataCursor),
      job.scalar<double>(kSgdLoss, std::numeric_limits<double>::infinity(), {.output = true}),
  };
  add_epoch_limiter(job, options.max_epochs);
  // The shard is a pure function of (seed, rank): regenerated on first use after a start or a
  // resume, never checkpointed.
  auto shard = std::make_shared<Shard>();
  job.epoch_group.add("train", [options, blobs, shard](TaskContext& context) {
    if (shard->rank != context.comm.rank()) {
      *shard = generate_shard(options, context.comm.rank());
    }
    train_one_epoch(options, blobs, *shard, context);
  });
  const double threshold = options.loss_threshold;
  job.add_stop_condition("loss_below_threshold", [threshold, blobs](const Workspace& workspace) {
    return blobs.loss.of(workspace) < threshold;
  });
  // The problem and its data; learning rate, momentum, batching and limits may change.
  for (const char* option : {"seed", "features", "samples_per_rank", "noise"}) {
    job.declare_run_defining_option(option);
  }
  job.exit_group.add("export_model", [options, blobs](TaskContext& context) {
    export_model(options, blobs, context);
  });
  return job;
}

namespace {

void declare_options(JobOptions& options, SgdRegressionOptions& values) {
  options.add("seed", &values.seed, "seed of the synthetic data");
  options.add("features", &values.features, "features per sample");
  options.add("samples_per_rank", &values.samples_per_rank, "samples in each rank's shard");
  options.add("batch_size", &values.batch_size, "samples per rank in one mini-batch");
  options.add("batches_per_epoch", &values.batches_per_epoch, "optimizer steps per epoch");
  options.add("learning_rate", &values.learning_rate, "SGD step size");
  options.add("momentum", &values.momentum, "momentum factor");
  options.add("noise", &values.noise, "target noise (std. dev.)");
  options.add("max_epochs", &values.max_epochs, "stop after this many epochs");
  options.add("loss_threshold", &values.loss_threshold,
              "stop once the mean squared error falls below this");
  options.add("model_file", &values.model_file,
              "HDF5 file the exit group writes the model to (empty: none)");
}

EPOCHRUN_REGISTER_JOB(sgd_regression,
                      "data-parallel linear regression by SGD with momentum (the main job)",
                      with_options<SgdRegressionOptions>(declare_options, make_sgd_regression));

}  // namespace
}  // namespace epochrun::jobs
