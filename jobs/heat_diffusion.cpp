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

// Communicator has no typed neighbour exchange, so the job's own MPI_Sendrecv goes through the
// job's communicator (raw()). MPI_PROC_NULL at the grid's edges leaves those halos untouched.
void exchange_halo(std::span<const double> field, std::size_t columns, double top_temperature,
                   const Communicator& comm, Halo& halo) {
  const int rank = comm.rank();
  const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  const int down = rank + 1 < comm.size() ? rank + 1 : MPI_PROC_NULL;
  std::fill(halo.above.begin(), halo.above.end(), top_temperature);
  std::fill(halo.below.begin(), halo.below.end(), 0.0);
  const int count = static_cast<int>(columns);
  const double* first_row = field.data();
  const double* last_row = field.data() + field.size() - columns;
  constexpr int kUpward = 1;
  constexpr int kDownward = 2;
  check_mpi(MPI_Sendrecv(first_row, count, MPI_DOUBLE, up, kUpward, halo.below.data(), count,
                         MPI_DOUBLE, down, kUpward, comm.raw(), MPI_STATUS_IGNORE),
            "MPI_Sendrecv (halo upward)");
  check_mpi(MPI_Sendrecv(last_row, count, MPI_DOUBLE, down, kDownward, halo.above.data(), count,
                         MPI_DOUBLE, up, kDownward, comm.raw(), MPI_STATUS_IGNORE),
            "MPI_Sendrecv (halo downward)");
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

void run_epoch(const HeatDiffusionOptions& options, Blob& scratch, TaskContext& context) {
  auto& workspace = context.workspace;
  const auto columns = static_cast<std::size_t>(options.columns);
  if (scratch.shape() != workspace.get(kHeatField).shape()) {
    scratch = Blob(DType::kF64, workspace.get(kHeatField).shape());
  }
  Halo halo{std::vector<double>(columns), std::vector<double>(columns)};
  double largest = 0.0;
  for (std::int64_t s = 0; s < options.sweeps_per_epoch; ++s) {
    auto& field = workspace.get(kHeatField);
    exchange_halo(field.as<double>(), columns, options.top_temperature, context.comm, halo);
    largest = sweep(field.as<double>(), scratch.as<double>(), columns, halo);
    std::swap(field, scratch);  // the new field in the workspace, without copying it
  }
  workspace.get(kHeatSweeps).item<std::int64_t>() += options.sweeps_per_epoch;
  const double change = context.comm.allreduce_max(largest);
  workspace.get(kHeatMaxChange).item<double>() = change;

  const auto cells = workspace.get(kHeatField).as<double>();
  auto summary = workspace.get(kHeatLocalSummary).as<double>();
  summary[0] = 0.0;
  summary[1] = -std::numeric_limits<double>::infinity();
  summary[2] = std::numeric_limits<double>::infinity();
  for (const double cell : cells) {
    summary[0] += cell;
    summary[1] = std::max(summary[1], cell);
    summary[2] = std::min(summary[2], cell);
  }
  spdlog::info("heat_diffusion epoch {}: {} sweeps, max change {:.3e}", context.epoch,
               workspace.get(kHeatSweeps).item<std::int64_t>(), change);
}

// Rank 0, after the download: the whole grid's mean, max and min from every node's summary.
void summarize(const HeatDiffusionOptions& options, TaskContext& context) {
  if (context.downloaded == nullptr) {
    return;
  }
  double sum = 0.0;
  double largest = -std::numeric_limits<double>::infinity();
  double smallest = std::numeric_limits<double>::infinity();
  for (const auto& [node, outputs] : *context.downloaded) {
    const auto local = outputs.at(kHeatLocalSummary).as<double>();
    sum += local[0];
    largest = std::max(largest, local[1]);
    smallest = std::min(smallest, local[2]);
  }
  const double cells =
      double(context.downloaded->size()) * double(rows_per_rank(options)) * double(options.columns);
  const std::vector<double> global = {sum / cells, largest, smallest};
  context.workspace.put(kHeatGlobalSummary, Blob::of(Shape{3}, std::span<const double>(global)));
}

// Rank 0: the summary as JSON, for scripts.
void write_output(const HeatDiffusionOptions& options, TaskContext& context) {
  if (context.downloaded == nullptr || options.output_file.empty()) {
    return;
  }
  const auto& workspace = context.workspace;
  const auto global = workspace.get(kHeatGlobalSummary).as<double>();
  const nlohmann::json summary = {{"job", "heat_diffusion"},
                                  {"epoch", context.epoch},
                                  {"ranks", context.downloaded->size()},
                                  {"rows", context.downloaded->size() * rows_per_rank(options)},
                                  {"columns", options.columns},
                                  {"sweeps", workspace.get(kHeatSweeps).item<std::int64_t>()},
                                  {"max_change", workspace.get(kHeatMaxChange).item<double>()},
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
  job.init_group.add("init_field", [options, field_shape](TaskContext& context) {
    auto& workspace = context.workspace;
    auto& field = workspace.put(kHeatField, Blob(DType::kF64, field_shape));
    auto cells = field.as<double>();
    const std::uint64_t first = static_cast<std::uint64_t>(context.comm.rank()) * cells.size();
    for (std::size_t i = 0; i < cells.size(); ++i) {
      cells[i] = initial_value(options.seed, first + i);
    }
    workspace.put(kHeatSweeps, Blob::scalar<std::int64_t>(0));
    workspace.put(kHeatMaxChange, Blob::scalar<double>(std::numeric_limits<double>::infinity()));
    workspace.put(kHeatLocalSummary, Blob(DType::kF64, {3}));
  });
  add_epoch_limiter(job, options.max_epochs);
  // The sweep's second buffer: overwritten entirely by every sweep, so never checkpointed.
  auto scratch = std::make_shared<Blob>();
  job.epoch_group.add(
      "sweep", [options, scratch](TaskContext& context) { run_epoch(options, *scratch, context); });
  const double tolerance = options.tolerance;
  job.add_stop_condition("converged", [tolerance](const Workspace& workspace) {
    return workspace.get(kHeatMaxChange).item<double>() < tolerance;
  });
  job.expect_blob(kHeatField, DType::kF64, field_shape);
  job.expect_blob(kHeatSweeps, DType::kI64, {});
  job.expect_blob(kHeatMaxChange, DType::kF64, {});
  job.expect_blob(kHeatLocalSummary, DType::kF64, {3});
  job.declare_output(kHeatLocalSummary);
  job.download_group.add("summarize",
                         [options](TaskContext& context) { summarize(options, context); });
  job.exit_group.add("write_output",
                     [options](TaskContext& context) { write_output(options, context); });
  return job;
}

namespace {

class HeatDiffusionDefinition : public JobDefinition {
 public:
  void add_options(boost::program_options::options_description& options,
                   const std::string& prefix) override {
    namespace po = boost::program_options;
    auto& o = options_;
    auto name = [&](const char* key) { return prefix + key; };
    options.add_options()(name("mib_per_rank").c_str(),
                          po::value(&o.mib_per_rank)->default_value(o.mib_per_rank),
                          "size of each rank's part of the field, in MiB (fractions allowed)")(
        name("columns").c_str(), po::value(&o.columns)->default_value(o.columns),
        "cells per grid row")(name("sweeps_per_epoch").c_str(),
                              po::value(&o.sweeps_per_epoch)->default_value(o.sweeps_per_epoch),
                              "Jacobi sweeps per epoch")(
        name("max_epochs").c_str(), po::value(&o.max_epochs)->default_value(o.max_epochs),
        "stop after this many epochs")(
        name("tolerance").c_str(), po::value(&o.tolerance)->default_value(o.tolerance),
        "stop once an epoch's last sweep changes no cell by this "
        "much")(name("seed").c_str(), po::value(&o.seed)->default_value(o.seed),
                "seed of the initial field")(
        name("top_temperature").c_str(),
        po::value(&o.top_temperature)->default_value(o.top_temperature),
        "fixed temperature above the first row (the other edges are at 0)")(
        name("output_file").c_str(), po::value(&o.output_file)->default_value(o.output_file),
        "JSON file the exit group writes the global mean, max and min to (empty: none)");
  }
  Job build() const override { return make_heat_diffusion(options_); }

 private:
  HeatDiffusionOptions options_;
};

const RegisterJob kRegistration({"heat_diffusion",
                                 "Jacobi sweeps of a 2-D heat equation, rows split across ranks",
                                 [] { return std::make_unique<HeatDiffusionDefinition>(); }});

}  // namespace
}  // namespace epochrun::jobs
