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

// The field's decomposition: the grid over process_grid(ranks, 2), ranks numbered row-major
// over it. It is balanced_block's, spelled out because the halo exchange needs the same grid
// to find a block's neighbours.
Block heat_block(const Shape& global_shape, int rank, int ranks) {
  return grid_block(global_shape, process_grid(ranks, 2), rank);
}

// Where this rank's block lies: its cells and its neighbours over the process grid
// (Communicator::kNoRank at the grid's edges).
struct Layout {
  Block block;
  std::size_t rows = 0;     // the block's rows
  std::size_t columns = 0;  // the block's columns
  int grid_row = 0;
  int grid_column = 0;
  int grid_columns = 1;
  int up = Communicator::kNoRank;
  int down = Communicator::kNoRank;
  int left = Communicator::kNoRank;
  int right = Communicator::kNoRank;
};

// Every rank needs at least one row and one column: a rank with an empty block would sit
// between two neighbours without passing their halos on.
Layout layout_of(const GlobalArrayHandle<double>& field, const Communicator& comm) {
  const int rank = comm.rank();
  const auto grid = process_grid(comm.size(), 2);
  const auto& shape = field.global_shape();
  if (shape[0] < std::uint64_t(grid[0]) || shape[1] < std::uint64_t(grid[1])) {
    throw UsageError("heat_diffusion: a grid of " + std::to_string(shape[0]) + " x " +
                     std::to_string(shape[1]) + " cells cannot be split over " +
                     std::to_string(comm.size()) + " ranks (a process grid of " +
                     std::to_string(grid[0]) + " x " + std::to_string(grid[1]) +
                     "): every rank needs at least one row and one column");
  }
  Layout layout;
  layout.block = field.block(rank, comm.size());
  layout.rows = static_cast<std::size_t>(layout.block.count[0]);
  layout.columns = static_cast<std::size_t>(layout.block.count[1]);
  layout.grid_columns = grid[1];
  layout.grid_row = rank / grid[1];
  layout.grid_column = rank % grid[1];
  if (layout.grid_row > 0) {
    layout.up = rank - grid[1];
  }
  if (layout.grid_row + 1 < grid[0]) {
    layout.down = rank + grid[1];
  }
  if (layout.grid_column > 0) {
    layout.left = rank - 1;
  }
  if (layout.grid_column + 1 < grid[1]) {
    layout.right = rank + 1;
  }
  return layout;
}

// The cells just outside this rank's block: from the neighbouring ranks, or the fixed boundary
// temperature at the grid's edges. A column travels packed into a contiguous buffer.
struct Halo {
  std::vector<double> above;
  std::vector<double> below;
  std::vector<double> left;
  std::vector<double> right;
  std::vector<double> first_column;  // sent to the left neighbour
  std::vector<double> last_column;   // sent to the right neighbour

  explicit Halo(const Layout& layout)
      : above(layout.columns),
        below(layout.columns),
        left(layout.rows),
        right(layout.rows),
        first_column(layout.rows),
        last_column(layout.rows) {}
};

void exchange_halo(std::span<const double> field, const Layout& layout, double top_temperature,
                   const Communicator& comm, Halo& halo) {
  // A side without a neighbour (kNoRank) receives nothing and keeps its boundary value.
  std::fill(halo.above.begin(), halo.above.end(), top_temperature);
  std::fill(halo.below.begin(), halo.below.end(), 0.0);
  std::fill(halo.left.begin(), halo.left.end(), 0.0);
  std::fill(halo.right.begin(), halo.right.end(), 0.0);
  const std::size_t columns = layout.columns;
  for (std::size_t i = 0; i < layout.rows; ++i) {
    halo.first_column[i] = field[i * columns];
    halo.last_column[i] = field[i * columns + columns - 1];
  }
  constexpr int kUpward = 1;
  constexpr int kDownward = 2;
  constexpr int kLeftward = 3;
  constexpr int kRightward = 4;
  comm.sendrecv(field.first(columns), layout.up, std::span(halo.below), layout.down, kUpward);
  comm.sendrecv(field.last(columns), layout.down, std::span(halo.above), layout.up, kDownward);
  comm.sendrecv(std::span<const double>(halo.first_column), layout.left, std::span(halo.right),
                layout.right, kLeftward);
  comm.sendrecv(std::span<const double>(halo.last_column), layout.right, std::span(halo.left),
                layout.left, kRightward);
}

// One Jacobi sweep of the block from `field` into `next`; returns this rank's largest change of
// a cell. Every cell is computed from the previous values of its neighbours in one fixed
// expression, wherever the block's edges are.
double sweep(std::span<const double> field, std::span<double> next, const Layout& layout,
             const Halo& halo) {
  const std::size_t rows = layout.rows;
  const std::size_t columns = layout.columns;
  double largest = 0.0;
  for (std::size_t i = 0; i < rows; ++i) {
    const double* up = i == 0 ? halo.above.data() : &field[(i - 1) * columns];
    const double* down = i + 1 == rows ? halo.below.data() : &field[(i + 1) * columns];
    const double* row = &field[i * columns];
    double* out = &next[i * columns];
    for (std::size_t j = 0; j < columns; ++j) {
      const double left = j == 0 ? halo.left[i] : row[j - 1];
      const double right = j + 1 == columns ? halo.right[i] : row[j + 1];
      out[j] = 0.25 * ((up[j] + down[j]) + (left + right));
      largest = std::max(largest, std::abs(out[j] - row[j]));
    }
  }
  return largest;
}

// The job's checkpointed state, declared once in make_heat_diffusion.
struct HeatBlobs {
  GlobalArrayHandle<double> field;
  ScalarHandle<std::int64_t> sweeps;
  ScalarHandle<double> max_change;
};

void run_epoch(const HeatDiffusionOptions& options, const HeatBlobs& blobs, Blob& scratch,
               TaskContext& context) {
  const auto layout = layout_of(blobs.field, context.comm);
  auto& field = blobs.field.blob(context.workspace);
  if (scratch.shape() != field.shape()) {
    scratch = Blob(DType::kF64, field.shape());
  }
  Halo halo(layout);
  double largest = 0.0;
  for (std::int64_t s = 0; s < options.sweeps_per_epoch; ++s) {
    exchange_halo(field.as<double>(), layout, options.top_temperature, context.comm, halo);
    largest = sweep(field.as<double>(), scratch.as<double>(), layout, halo);
    std::swap(field, scratch);  // the new field in the workspace, without copying it
  }
  // Replicated: every rank adds the same count and receives the same maximum (a maximum is
  // exact in any order, so it is the same at any rank count).
  blobs.sweeps.of(context) += options.sweeps_per_epoch;
  const double change = context.comm.allreduce(largest, Reduction::kMax);
  blobs.max_change.of(context) = change;
  spdlog::info("heat_diffusion epoch {}: {} sweeps, max change {:.3e}", context.epoch,
               blobs.sweeps.of(context), change);
}

// The sum of each global row of this rank's block, left to right over the whole row, on the
// ranks of the grid's first column (the other ranks of a process row send their segments to
// it, a chunk of rows at a time); empty on the other ranks. A sum in this one order is the same
// bits whatever the decomposition.
std::vector<double> row_sums(const GlobalArrayHandle<double>& handle, std::span<const double> field,
                             const Layout& layout, const Communicator& comm) {
  const auto global_columns = static_cast<std::size_t>(handle.global_shape()[1]);
  const int first_of_row = layout.grid_row * layout.grid_columns;
  // About 1 MiB of a row band at a time: few messages, little memory.
  const std::size_t chunk = std::max<std::size_t>(1, (std::size_t(1) << 17) / global_columns);
  constexpr int kSegments = 5;
  std::vector<double> sums;
  if (layout.grid_column != 0) {
    for (std::size_t i = 0; i < layout.rows; i += chunk) {
      const std::size_t n = std::min(chunk, layout.rows - i);
      comm.sendrecv(field.subspan(i * layout.columns, n * layout.columns), first_of_row,
                    std::span<double>(), Communicator::kNoRank, kSegments);
    }
    return sums;
  }
  std::vector<Block> blocks;
  for (int q = 0; q < layout.grid_columns; ++q) {
    blocks.push_back(handle.block(first_of_row + q, comm.size()));
  }
  std::vector<double> band(chunk * global_columns);
  std::vector<double> segment;
  sums.reserve(layout.rows);
  for (std::size_t i = 0; i < layout.rows; i += chunk) {
    const std::size_t n = std::min(chunk, layout.rows - i);
    for (int q = 0; q < layout.grid_columns; ++q) {
      const auto start = static_cast<std::size_t>(blocks[std::size_t(q)].start[1]);
      const auto count = static_cast<std::size_t>(blocks[std::size_t(q)].count[1]);
      std::span<const double> rows_of_q;
      if (q == 0) {
        rows_of_q = field.subspan(i * layout.columns, n * layout.columns);
      } else {
        segment.resize(n * count);
        comm.sendrecv(std::span<const double>(), Communicator::kNoRank, std::span(segment),
                      first_of_row + q, kSegments);
        rows_of_q = segment;
      }
      for (std::size_t r = 0; r < n; ++r) {
        std::copy_n(&rows_of_q[r * count], count, &band[r * global_columns + start]);
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      double sum = 0.0;
      for (std::size_t j = 0; j < global_columns; ++j) {
        sum += band[r * global_columns + j];
      }
      sums.push_back(sum);
    }
  }
  return sums;
}

// Every rank: the whole grid's mean, max and min, into the workspace (kHeatGlobalSummary).
void summarize(const HeatBlobs& blobs, TaskContext& context) {
  const auto& comm = context.comm;
  const auto layout = layout_of(blobs.field, comm);
  const auto field = blobs.field.of(context.workspace);
  double largest = -std::numeric_limits<double>::infinity();
  double smallest = std::numeric_limits<double>::infinity();
  for (const double cell : field) {
    largest = std::max(largest, cell);
    smallest = std::min(smallest, cell);
  }
  largest = comm.allreduce(largest, Reduction::kMax);
  smallest = comm.allreduce(smallest, Reduction::kMin);
  // Rank order over the grid's first column is row order: rank 0 adds the row sums in it.
  const auto sums = row_sums(blobs.field, field, layout, comm);
  double total = 0.0;
  for (const auto& part : comm.gather(std::span<const double>(sums))) {
    for (const double sum : part) {
      total += sum;
    }
  }
  comm.broadcast(total);
  const auto& shape = blobs.field.global_shape();
  const std::vector<double> global = {total / (double(shape[0]) * double(shape[1])), largest,
                                      smallest};
  context.workspace.put(kHeatGlobalSummary, Blob::of(Shape{3}, std::span<const double>(global)));
}

// Rank 0: the summary as JSON, for scripts.
void write_output(const HeatDiffusionOptions& options, const HeatBlobs& blobs,
                  TaskContext& context) {
  if (!context.comm.is_root() || options.output_file.empty()) {
    return;
  }
  const auto global = context.workspace.get(kHeatGlobalSummary).as<double>();
  const nlohmann::json summary = {{"job", "heat_diffusion"},
                                  {"epoch", context.epoch},
                                  {"ranks", context.comm.size()},
                                  {"process_grid", process_grid(context.comm.size(), 2)},
                                  {"rows", options.rows},
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

void validate(const HeatDiffusionOptions& options) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) {
      throw UsageError("heat_diffusion." + what);
    }
  };
  require(options.rows >= 1 && options.rows <= 1 << 24, "rows must be in [1, 16777216]");
  require(options.columns >= 1 && options.columns <= 1 << 24, "columns must be in [1, 16777216]");
  require(options.sweeps_per_epoch >= 1, "sweeps_per_epoch must be at least 1");
  require(options.max_epochs >= 1, "max_epochs must be at least 1");
  require(std::isfinite(options.tolerance) && options.tolerance >= 0,
          "tolerance must be a finite value >= 0");
  require(std::isfinite(options.top_temperature), "top_temperature must be finite");
}

Job make_heat_diffusion(const HeatDiffusionOptions& options) {
  validate(options);
  Job job("heat_diffusion");
  const Shape grid = {static_cast<std::uint64_t>(options.rows),
                      static_cast<std::uint64_t>(options.columns)};
  const HeatBlobs blobs{
      job.global_array<double>(kHeatField, grid, heat_block),
      job.replicated_scalar<std::int64_t>(kHeatSweeps),
      job.replicated_scalar<double>(kHeatMaxChange, std::numeric_limits<double>::infinity()),
  };
  job.init_group.add("init_field", [options, blobs](TaskContext& context) {
    const auto layout = layout_of(blobs.field, context.comm);
    auto cells = blobs.field.of(context);
    const auto global_columns = static_cast<std::uint64_t>(options.columns);
    for (std::size_t i = 0; i < layout.rows; ++i) {
      const std::uint64_t row_start = (layout.block.start[0] + i) * global_columns;
      for (std::size_t j = 0; j < layout.columns; ++j) {
        cells[i * layout.columns + j] =
            initial_value(options.seed, row_start + layout.block.start[1] + j);
      }
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
  // The grid and its start; the work per epoch, the limits and the boundary may change.
  for (const char* option : {"rows", "columns", "seed"}) {
    job.declare_run_defining_option(option);
  }
  job.download_group.add("summarize", [blobs](TaskContext& context) { summarize(blobs, context); });
  job.exit_group.add("write_output", [options, blobs](TaskContext& context) {
    write_output(options, blobs, context);
  });
  return job;
}

namespace {

void declare_options(JobOptions& options, HeatDiffusionOptions& values) {
  options.add("rows", &values.rows,
              "rows of the whole grid, whatever the rank count (512 x 1024 f64 cells = 4 MiB by "
              "default; a resume on another rank count keeps the grid)");
  options.add("columns", &values.columns, "cells per row of the whole grid");
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
                      "Jacobi sweeps of a 2-D heat equation, a global grid split over a 2-D "
                      "process grid",
                      with_options<HeatDiffusionOptions>(declare_options, make_heat_diffusion));

}  // namespace
}  // namespace epochrun::jobs
