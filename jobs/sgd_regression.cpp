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

// The samples one rank holds: global samples first, first + stride, ... (row-major features
// and targets).
struct Shard {
  int rank = -1;
  int ranks = 0;
  std::size_t features = 0;
  std::vector<double> x;
  std::vector<double> y;
  std::size_t rows() const { return y.size(); }
};

// The true parameters, from the seed alone.
struct Truth {
  std::vector<double> weights;
  double bias = 0;
};

Truth truth_of(const SgdRegressionOptions& options) {
  Random random(options.seed);
  Truth truth;
  truth.weights.resize(static_cast<std::size_t>(options.features));
  for (auto& weight : truth.weights) {
    weight = random.gaussian();
  }
  truth.bias = random.gaussian();
  return truth;
}

// Rank `rank` of `ranks`: the global samples i with i % ranks == rank. Sample i is drawn from a
// generator seeded by (seed, i) alone, so it is the same sample at any rank count.
Shard generate_shard(const SgdRegressionOptions& options, int rank, int ranks) {
  const auto features = static_cast<std::size_t>(options.features);
  const auto samples = static_cast<std::uint64_t>(options.samples);
  const auto stride = static_cast<std::uint64_t>(ranks);
  const auto first = static_cast<std::uint64_t>(rank);
  const std::size_t rows = first < samples ? (samples - first + stride - 1) / stride : 0;
  const auto truth = truth_of(options);

  Shard shard;
  shard.rank = rank;
  shard.ranks = ranks;
  shard.features = features;
  shard.x.resize(rows * features);
  shard.y.resize(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    const std::uint64_t sample = first + row * stride;
    Random random(options.seed ^ (0x632be59bd9b4e019ULL * (sample + 1)));
    double target = truth.bias;
    for (std::size_t j = 0; j < features; ++j) {
      const double value = random.gaussian();
      shard.x[row * features + j] = value;
      target += value * truth.weights[j];
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

// Mean squared error over all samples (every rank's shard).
double global_loss(const SgdRegressionOptions& options, const Shard& shard,
                   std::span<const double> weights, double bias, const Communicator& comm) {
  double sum = 0.0;
  for (std::size_t row = 0; row < shard.rows(); ++row) {
    const double error = prediction_error(shard, row, weights, bias);
    sum += error * error;
  }
  return comm.allreduce(sum, Reduction::kSum) / double(options.samples);
}

void train_one_epoch(const SgdRegressionOptions& options, const SgdBlobs& blobs, const Shard& shard,
                     TaskContext& context) {
  auto weights = blobs.weights.of(context);
  auto& bias = blobs.bias.of(context);
  auto& cursor = blobs.data_cursor.of(context);
  const std::size_t features = shard.features;
  const auto samples = static_cast<std::uint64_t>(options.samples);
  const auto stride = static_cast<std::uint64_t>(shard.ranks);
  const auto rank = static_cast<std::uint64_t>(shard.rank);
  auto state = OptimizerState::load(blobs.optimizer_state.of(context), features + 1);

  // gradient[0..features) for the weights, [features] for the bias.
  std::vector<double> gradient(features + 1);
  for (std::int64_t batch = 0; batch < options.batches_per_epoch; ++batch) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    // The batch is the next batch_size global samples; this rank adds those it holds, in
    // global order.
    for (std::int64_t i = 0; i < options.batch_size; ++i) {
      const std::uint64_t sample =
          (static_cast<std::uint64_t>(cursor) + std::uint64_t(i)) % samples;
      if (sample % stride != rank) {
        continue;
      }
      const auto row = static_cast<std::size_t>(sample / stride);
      const double error = prediction_error(shard, row, weights, bias);
      for (std::size_t j = 0; j < features; ++j) {
        gradient[j] += error * shard.x[row * features + j];
      }
      gradient[features] += error;
    }
    cursor = static_cast<std::int64_t>(
        (static_cast<std::uint64_t>(cursor) + std::uint64_t(options.batch_size)) % samples);
    // Data parallelism: the same step on every rank.
    context.comm.allreduce(std::span(gradient), Reduction::kSum);
    const double count = double(options.batch_size);
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
  const double loss = global_loss(options, shard, weights, bias, context.comm);
  blobs.loss.of(context) = loss;
  spdlog::info("sgd_regression epoch {}: loss {:.6e} after {} steps", context.epoch, loss,
               state.step);
}

// Every replica must hold the same model (each rank sends its parameters to rank 0), then rank 0
// exports it.
void export_model(const SgdRegressionOptions& options, const SgdBlobs& blobs,
                  TaskContext& context) {
  if (options.model_file.empty()) {
    return;
  }
  const auto weights = blobs.weights.of(context);
  const double bias = blobs.bias.of(context);
  std::vector<double> model(weights.begin(), weights.end());
  model.push_back(bias);
  const auto replicas = context.comm.gather(std::span<const double>(model));
  if (!context.comm.is_root()) {
    return;
  }
  for (std::size_t rank = 0; rank < replicas.size(); ++rank) {
    if (replicas[rank] != model) {
      throw Error("data-parallel replicas diverged: " + Job::node_name(int(rank)) +
                  " holds other parameters than " + Job::node_name(0));
    }
  }
  write_blob_file(options.model_file,
                  {{kSgdWeights, Blob::of(Shape{weights.size()}, std::span<const double>(weights))},
                   {kSgdBias, Blob::scalar(bias)}},
                  {{"job", "sgd_regression"},
                   {"epoch", std::to_string(context.epoch)},
                   {"loss", std::to_string(blobs.loss.of(context))}});
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
  require(options.samples >= 1 && options.samples <= 10'000'000'000,
          "samples must be in [1, 10000000000]");
  require(options.features * options.samples <= 32'000'000'000,
          "features * samples must be at most 32000000000 (256 GB of data over all ranks)");
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
  // Zeros are the start: no weights, no bias, a fresh optimizer, the first sample; only the
  // loss is unknown. All replicated: every rank takes the same steps over the same global data.
  const SgdBlobs blobs{
      job.replicated<double>(kSgdWeights, {features}),
      job.replicated_scalar<double>(kSgdBias, 0.0),
      job.replicated<std::byte>(kSgdOptimizerState, {OptimizerState::byte_size(features + 1)}),
      job.replicated_scalar<std::int64_t>(kSgdDataCursor),
      job.replicated_scalar<double>(kSgdLoss, std::numeric_limits<double>::infinity()),
  };
  add_epoch_limiter(job, options.max_epochs);
  // The shard is a pure function of (seed, rank, ranks): regenerated on first use after a start
  // or a resume, never checkpointed.
  auto shard = std::make_shared<Shard>();
  job.epoch_group.add("train", [options, blobs, shard](TaskContext& context) {
    if (shard->rank != context.comm.rank() || shard->ranks != context.comm.size()) {
      *shard = generate_shard(options, context.comm.rank(), context.comm.size());
    }
    train_one_epoch(options, blobs, *shard, context);
  });
  const double threshold = options.loss_threshold;
  job.add_stop_condition("loss_below_threshold", [threshold, blobs](const Workspace& workspace) {
    return blobs.loss.of(workspace) < threshold;
  });
  // The problem and its data; learning rate, momentum, batching and limits may change.
  for (const char* option : {"seed", "features", "samples", "noise"}) {
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
  options.add("samples", &values.samples,
              "samples of the whole data set, whatever the rank count (rank r of R holds the "
              "samples i with i % R == r)");
  options.add("batch_size", &values.batch_size, "samples in one mini-batch, over all ranks");
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
