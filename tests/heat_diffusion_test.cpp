// heat_diffusion: a job whose state is a field split across ranks. It must converge, resume
// bit-identically from any epoch, and exchange its halos so that 3 ranks compute exactly what
// 1 rank computes on the same grid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "heat_diffusion.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kColumns = 12;
constexpr std::int64_t kRowsPerRank = 4;

// A 12-column grid with `rows` rows on each rank (mib_per_rank is exact: a multiple of 2^-20).
// Tolerance 0 by default: every epoch runs, so comparisons cover all of them.
jobs::HeatDiffusionOptions small_grid(std::int64_t sweeps_per_epoch, std::int64_t max_epochs,
                                      double tolerance = 0, std::int64_t rows = kRowsPerRank) {
  jobs::HeatDiffusionOptions options;
  options.columns = kColumns;
  options.mib_per_rank = double(rows * kColumns * 8) / double(1 << 20);
  options.sweeps_per_epoch = sweeps_per_epoch;
  options.max_epochs = max_epochs;
  options.tolerance = tolerance;
  options.output_file = "";
  return options;
}

RunSummary run(const Communicator& comm, const jobs::HeatDiffusionOptions& job_options,
               const std::filesystem::path& directory, ResumeRequest resume, Workspace& workspace,
               std::optional<std::int64_t> num_epochs = std::nullopt) {
  RunOptions options;
  options.checkpoint_dir = directory;
  options.resume = resume;
  options.num_epochs = num_epochs;
  return JobRunner(jobs::make_heat_diffusion(job_options), comm, options).run(workspace);
}

// The whole grid on rank 0 (rank order is row order); empty elsewhere.
std::vector<double> gather_field(const Communicator& comm, const Workspace& workspace) {
  std::vector<double> grid;
  for (const auto& part : comm.gather(workspace.get(jobs::kHeatField).raw())) {
    const auto at = grid.size();
    grid.resize(at + part.size() / sizeof(double));
    std::memcpy(grid.data() + at, part.data(), part.size());
  }
  return grid;
}

// The largest change one more Jacobi sweep would make, computed here from the whole grid.
double residual(const std::vector<double>& grid, std::size_t columns, double top) {
  const std::size_t rows = grid.size() / columns;
  auto at = [&](std::ptrdiff_t i, std::ptrdiff_t j) {
    if (i < 0) {
      return top;
    }
    if (i >= std::ptrdiff_t(rows) || j < 0 || j >= std::ptrdiff_t(columns)) {
      return 0.0;
    }
    return grid[std::size_t(i) * columns + std::size_t(j)];
  };
  double largest = 0;
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(rows); ++i) {
    for (std::ptrdiff_t j = 0; j < std::ptrdiff_t(columns); ++j) {
      const double mean = 0.25 * ((at(i - 1, j) + at(i + 1, j)) + (at(i, j - 1) + at(i, j + 1)));
      largest = std::max(largest, std::abs(mean - at(i, j)));
    }
  }
  return largest;
}

TEST(HeatDiffusion, ConvergesOnASmallGridAndWritesItsSummary) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  auto options = small_grid(50, 200, 1e-9);
  options.output_file = (scratch / "summary.json").string();
  Workspace workspace;
  auto summary = run(world, options, scratch / "ck", ResumeRequest::from_scratch(), workspace);
  EXPECT_NE(summary.stop_reason.find("converged"), std::string::npos) << summary.stop_reason;
  EXPECT_LT(summary.last_epoch, options.max_epochs);
  EXPECT_LT(workspace.get(jobs::kHeatMaxChange).item<double>(), options.tolerance);
  EXPECT_EQ(workspace.get(jobs::kHeatSweeps).item<std::int64_t>(), 50 * summary.last_epoch);

  const auto grid = gather_field(world, workspace);
  if (world.is_root()) {
    ASSERT_EQ(grid.size(), std::size_t(world.size() * kRowsPerRank * kColumns));
    // Converged: a sweep would change nothing by more than the tolerance, and the maximum
    // principle holds (every cell between the boundary temperatures 0 and 1).
    EXPECT_LT(residual(grid, kColumns, options.top_temperature), options.tolerance);
    for (const double cell : grid) {
      EXPECT_TRUE(cell > 0 && cell < 1) << cell;
    }
    const auto written = nlohmann::json::parse(read_file(scratch / "summary.json"));
    EXPECT_EQ(written["epoch"], summary.last_epoch);
    EXPECT_EQ(written["ranks"], world.size());
    EXPECT_EQ(written["rows"], world.size() * kRowsPerRank);
    EXPECT_EQ(written["sweeps"], 50 * summary.last_epoch);
    double sum = 0;
    for (const double cell : grid) {
      sum += cell;
    }
    EXPECT_NEAR(written["mean"].get<double>(), sum / double(grid.size()), 1e-12);
    EXPECT_EQ(written["max"].get<double>(), *std::max_element(grid.begin(), grid.end()));
    EXPECT_EQ(written["min"].get<double>(), *std::min_element(grid.begin(), grid.end()));
  }
}

TEST(HeatDiffusion, ResumedFromAnyEpochEndsBitIdenticalToAnUninterruptedRun) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto options = small_grid(7, 6);

  Workspace uninterrupted;
  auto full = run(world, options, scratch / "a", ResumeRequest::from_scratch(), uninterrupted);
  ASSERT_EQ(full.last_epoch, 6);

  for (std::int64_t epoch = 0; epoch <= 6; ++epoch) {
    Workspace resumed;
    auto summary = run(world, options, scratch / "a", ResumeRequest::at(epoch), resumed);
    EXPECT_EQ(summary.resumed_from, epoch);
    EXPECT_EQ(summary.last_epoch, 6);
    EXPECT_EQ(resumed.blobs(), uninterrupted.blobs()) << "resumed from epoch " << epoch;
  }

  // Interrupted after epoch 2, as a preempted job would be, then resumed from the latest.
  Workspace before;
  ASSERT_EQ(run(world, options, scratch / "b", ResumeRequest::from_scratch(), before, 2).last_epoch,
            2);
  Workspace after;
  EXPECT_EQ(run(world, options, scratch / "b", ResumeRequest::latest(), after).last_epoch, 6);
  EXPECT_EQ(after.blobs(), uninterrupted.blobs());
}

TEST(HeatDiffusion, ThreeRanksComputeBitForBitWhatOneRankComputesOnTheSameGrid) {
  const auto world = Communicator::world();
  const auto options = small_grid(9, 5);
  Workspace parallel;
  run(world, options, "", ResumeRequest::from_scratch(), parallel);
  const auto grid = gather_field(world, parallel);

  if (world.is_root()) {
    // The same grid, all of its rows on one rank: no halo exchange at all.
    const auto serial_options = small_grid(9, 5, 0, kRowsPerRank * world.size());
    Workspace serial;
    run(Communicator::self(), serial_options, "", ResumeRequest::from_scratch(), serial);
    const auto cells = serial.get(jobs::kHeatField).as<double>();
    ASSERT_EQ(grid.size(), cells.size());
    EXPECT_EQ(std::memcmp(grid.data(), cells.data(), grid.size() * sizeof(double)), 0)
        << "the halo exchange lost or misplaced a row";
    EXPECT_EQ(parallel.get(jobs::kHeatMaxChange), serial.get(jobs::kHeatMaxChange));
    EXPECT_EQ(parallel.get(jobs::kHeatGlobalSummary).as<double>()[1],
              serial.get(jobs::kHeatGlobalSummary).as<double>()[1]);
  }
  world.barrier();
}

TEST(HeatDiffusion, OutOfRangeOptionsAreUsageErrors) {
  auto with = [](auto change) {
    auto options = small_grid(1, 1);
    change(options);
    return options;
  };
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.columns = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.mib_per_rank = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.mib_per_rank = NAN; })), UsageError);
  // Less than one row of 12 cells.
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.mib_per_rank = 64.0 / (1 << 20); })),
               UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.sweeps_per_epoch = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.max_epochs = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.tolerance = -1; })), UsageError);
  EXPECT_NO_THROW(jobs::validate(jobs::HeatDiffusionOptions{}));
}

}  // namespace
}  // namespace epochrun::testing
