// A real data-parallel training job: linear regression by mini-batch SGD with momentum.
//
// Each rank generates its own shard of a synthetic problem y = X w* + b* + noise from the
// seed; gradients are averaged over all ranks with MPI_Allreduce, so every rank holds the same
// parameters. The parameters, the optimizer state (opaque bytes) and the data cursor are
// checkpointed; the data itself is regenerated from the seed, never stored. It stops at an
// epoch limit or once the loss falls under a threshold; the exit group writes the model.
#pragma once

#include <cstdint>
#include <string>

#include "epochrun/job.hpp"

namespace epochrun::jobs {

struct SgdRegressionOptions {
  std::uint64_t seed = 20261122;
  std::int64_t features = 16;
  std::int64_t samples_per_rank = 4096;
  std::int64_t batch_size = 64;
  std::int64_t batches_per_epoch = 16;
  double learning_rate = 0.02;
  double momentum = 0.9;
  double noise = 0.01;
  std::int64_t max_epochs = 40;
  // The mean squared error cannot fall below noise^2 (1e-4 by default).
  double loss_threshold = 1.2e-4;
  std::string model_file = "sgd_model.h5";  // empty: do not export
};

inline constexpr const char* kSgdWeights = "weights";
inline constexpr const char* kSgdBias = "bias";
inline constexpr const char* kSgdOptimizerState = "optimizer_state";
inline constexpr const char* kSgdDataCursor = "data_cursor";
inline constexpr const char* kSgdLoss = "loss";

// Throws UsageError naming the option when a value is out of range.
void validate(const SgdRegressionOptions& options);
Job make_sgd_regression(const SgdRegressionOptions& options);

}  // namespace epochrun::jobs
