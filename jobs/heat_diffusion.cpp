#include "heat_diffusion.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "epochrun/epoch_limiter.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_registry.hpp"

namespace epochrun::jobs {
namespace {

// A uniform value in [0, 1) that depends only on the seed and the cell's global index
// (SplitMix64 of their sum), so every rank count starts from the same grid.
double initial_value(std::uint64_t seed, std::uint64_t global_index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (global_index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

// The rows just outside this rank's block: from the neighbouring ranks, or the fixed boundary
// temperature at the grid's top and bottom edges.
struct Halo {
  std::vector<double> above;
  std::vector<double> below;
};

// The halos from the neighbouring ranks (kNoRank at the grid's edges leaves those untouched).
void exchange_halo(std::span<const double> field, std::size_t columns, double top_temperature,
                   const Communicator& comm, Halo& halo) {
  const int rank = comm.rank();
  const int up = rank > 0 ? rank - 1 : Communicator::kNoRank;
  const int down = rank + 1 < comm.size() ? rank + 1 : Communicator::kNoRank;
  std::fill(halo.above.begin(), halo.above.end(), top_temperature);
  std::fill(halo.below.begin(), halo.below.end(), 0.0);
  const auto first_row = field.first(columns);
  const auto last_row = field.last(columns);
  constexpr int kUpward = 1;
  constexpr int kDownward = 2;
  comm.sendrecv(first_row, up, std::span(halo.below), down, kUpward);
  comm.sendrecv(last_row, down, std::span(halo.above), up, kDownward);
}

// One Jacobi sweep from `field` into `next`; returns this rank's largest change of a cell. The
// sides outside the first and last columns are at 0.
double sweep(std::span<const double> field, std::span<double> next, std::size_t columns,
             const Halo& halo) {
  const std::size_t rows = field.size() / columns;
  double largest = 0.0;
  for (std::size_t i = 0; i < rows; ++i) {
    const double* up = i == 0 ? halo.above.data() : &field[(i - 1) * columns];
    const double* down = i + 1 == rows ? halo.below.data() : &field[(i + 1) * columns];
    const double* row = &field[i * columns];
    double* out = &next[i * columns];
    for (std::size_t j = 0; j < columns; ++j) {
      const double left = j == 0 ? 0.0 : row[j - 1];
      const double right = j + 1 == columns ? 0.0 : row[j + 1];
      out[j] = 0.25 * ((up[j] + down[j]) + (left + right));
      largest = std::max(largest, std::abs(out[j] - row[j]));
    }
  }
  return largest;
}

// The job's checkpointed state, declared once in make_heat_diffusion.
struct HeatBlobs {
  BlobHandle<double> field;
  ScalarHandle<std::int64_t> sweeps;
  ScalarHandle<double> max_change;
  BlobHandle<double> local_summary;
};

void run_epoch(const HeatDiffusionOptions& options, const HeatBlobs& blobs, Blob& scratch,
               TaskContext& context) {
  auto& field = blobs.field.blob(context.workspace);
  const auto columns = static_cast<std::size_t>(options.columns);
  if (scratch.shape() != field.shape()) {
    scratch = Blob(DType::kF64, field.shape());
  }
  Halo halo{std::vector<double>(columns), std::vector<double>(columns)};
  double largest = 0.0;
  for (std::int64_t s = 0; s < options.sweeps_per_epoch; ++s) {
    exchange_halo(field.as<double>(), columns, options.top_temperature, context.comm, halo);
    largest = sweep(field.as<double>(), scratch.as<double>(), columns, halo);
    std::swap(field, scratch);  // the new field in the workspace, without copying it
  }
  blobs.sweeps.of(context) += options.sweeps_per_epoch;
  const double change = context.comm.allreduce(largest, Reduction::kMax);
  blobs.max_change.of(context) = change;

  auto summary = blobs.local_summary.of(context);
  summary[0] = 0.0;
  summary[1] = -std::numeric_limits<double>::infinity();
  summary[2] = std::numeric_limits<double>::infinity();
  for (const double cell : blobs.field.of(context)) {
    summary[0] += cell;
    summary[1] = std::max(summary[1], cell);
    summary[2] = std::min(summary[2], cell);
  }
  spdlog::info("heat_diffusion epoch {}: {} sweeps, max change {:.3e}", context.epoch,
               blobs.sweeps.of(context), change);
}

// Rank 0, after the download: the whole grid's mean, max and min from every node's summary.
void summarize(const HeatDiffusionOptions& options, const HeatBlobs& blobs, TaskContext& context) {
  if (!context.has_gathered()) {
    return;
  }
  const auto summaries = context.gathered(blobs.local_summary);
  double sum = 0.0;
  double largest = -std::numeric_limits<double>::infinity();
  double smallest = std::numeric_limits<double>::infinity();
  for (const auto& [node, local] : summaries) {
    sum += local[0];
    largest = std::max(largest, local[1]);
    smallest = std::min(smallest, local[2]);
  }
  const double cells =
      double(summaries.size()) * double(rows_per_rank(options)) * double(options.columns);
  const std::vector<double> global = {sum / cells, largest, smallest};
  context.workspace.put(kHeatGlobalSummary, Blob::of(Shape{3}, std::span<const double>(global)));
}

// Rank 0: the summary as JSON, for scripts.
void write_output(const HeatDiffusionOptions& options, const HeatBlobs& blobs,
                  TaskContext& context) {
  if (!context.has_gathered() || options.output_file.empty()) {
    return;
  }
  const auto ranks = context.gathered_blobs().size();
  const auto global = context.workspace.get(kHeatGlobalSummary).as<double>();
  const nlohmann::json summary = {{"job", "heat_diffusion"},
                                  {"epoch", context.epoch},
                                  {"ranks", ranks},
                                  {"rows", ranks * rows_per_rank(options)},
                                  {"columns", options.columns},
                                  {"sweeps", blobs.sweeps.of(context)},
                                  {"max_change", blobs.max_change.of(context)},
                                  {"mean", global[0]},
                                  {"max", global[1]},
                                  {"min", global[2]}};
  std::ofstream out(options.output_file);
  out << summary.dump(2) << "\n";
  out.close();
  if (!out) {
    throw Error("cannot write " + options.output_file);
  }
  spdlog::info("heat_diffusion summary written to {}", options.output_file);
}

}  // namespace

std::uint64_t rows_per_rank(const HeatDiffusionOptions& options) {
  return static_cast<std::uint64_t>(options.mib_per_rank * double(1 << 20) /
                                    (sizeof(double) * double(options.columns)));
}

void validate(const HeatDiffusionOptions& options) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) {
      throw UsageError("heat_diffusion." + what);
    }
  };
  require(options.columns >= 1 && options.columns <= 1 << 24, "columns must be in [1, 16777216]");
  require(std::isfinite(options.mib_per_rank) && options.mib_per_rank > 0 &&
              options.mib_per_rank <= 1 << 20,
          "mib_per_rank must be in (0, 1048576]");
  require(rows_per_rank(options) >= 1,
          "mib_per_rank must hold at least one row of columns f64 cells (columns * 8 bytes)");
  require(options.sweeps_per_epoch >= 1, "sweeps_per_epoch must be at least 1");
  require(options.max_epochs >= 1, "max_epochs must be at least 1");
  require(std::isfinite(options.tolerance) && options.tolerance >= 0,
          "tolerance must be a finite value >= 0");
  require(std::isfinite(options.top_temperature), "top_temperature must be finite");
}

Job make_heat_diffusion(const HeatDiffusionOptions& options) {
  validate(options);
  Job job("heat_diffusion");
  const Shape field_shape = {rows_per_rank(options), static_cast<std::uint64_t>(options.columns)};
  const HeatBlobs blobs{
      job.blob<double>(kHeatField, field_shape),
      job.scalar<std::int64_t>(kHeatSweeps),
      job.scalar<double>(kHeatMaxChange, std::numeric_limits<double>::infinity()),
      job.blob<double>(kHeatLocalSummary, {3}, {.output = true}),
  };
  job.init_group.add("init_field", [options, blobs](TaskContext& context) {
    auto cells = blobs.field.of(context);
    const std::uint64_t first = static_cast<std::uint64_t>(context.comm.rank()) * cells.size();
    for (std::size_t i = 0; i < cells.size(); ++i) {
      cells[i] = initial_value(options.seed, first + i);
    }
  });
  add_epoch_limiter(job, options.max_epochs);
  // The sweep's second buffer: overwritten entirely by every sweep, so never checkpointed.
  auto scratch = std::make_shared<Blob>();
  job.epoch_group.add("sweep", [options, blobs, scratch](TaskContext& context) {
    run_epoch(options, blobs, *scratch, context);
  });
  const double tolerance = options.tolerance;
  job.add_stop_condition("converged", [tolerance, blobs](const Workspace& workspace) {
    return blobs.max_change.of(workspace) < tolerance;
  });
  job.download_group.add(
      "summarize", [options, blobs](TaskContext& context) { summarize(options, blobs, context); });
  job.exit_group.add("write_output", [options, blobs](TaskContext& context) {
    write_output(options, blobs, context);
  });
  return job;
}

namespace {

void declare_options(JobOptions& options, HeatDiffusionOptions& values) {
  options.add("mib_per_rank", &values.mib_per_rank,
              "size of each rank's part of the field, in MiB (fractions allowed)");
  options.add("columns", &values.columns, "cells per grid row");
  options.add("sweeps_per_epoch", &values.sweeps_per_epoch, "Jacobi sweeps per epoch");
  options.add("max_epochs", &values.max_epochs, "stop after this many epochs");
  options.add("tolerance", &values.tolerance,
              "stop once an epoch's last sweep changes no cell by this much");
  options.add("seed", &values.seed, "seed of the initial field");
  options.add("top_temperature", &values.top_temperature,
              "fixed temperature above the first row (the other edges are at 0)");
  options.add("output_file", &values.output_file,
              "JSON file the exit group writes the global mean, max and min to (empty: none)");
}

EPOCHRUN_REGISTER_JOB(heat_diffusion,
                      "Jacobi sweeps of a 2-D heat equation, rows split across ranks",
                      with_options<HeatDiffusionOptions>(declare_options, make_heat_diffusion));

}  // namespace
}  // namespace epochrun::jobs
