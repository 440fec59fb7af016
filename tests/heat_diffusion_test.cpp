// heat_diffusion: a job whose state is a global array split over a 2-D process grid. It must
// converge, resume bit-identically from any epoch, and exchange its halos so that 4 ranks (a
// 2 x 2 grid: rows and columns both exchanged) compute exactly what 1 rank computes on the same
// grid, its mean included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "array_path.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "file_system_kind.hpp"
#include "heat_diffusion.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kRows = 14;
constexpr std::int64_t kColumns = 13;

// A 14 x 13 grid (odd sizes: the blocks differ by a row or a column) whatever the rank count.
// Tolerance 0 by default: every epoch runs, so comparisons cover all of them.
jobs::HeatDiffusionOptions small_grid(std::int64_t sweeps_per_epoch, std::int64_t max_epochs,
                                      double tolerance = 0) {
  jobs::HeatDiffusionOptions options;
  options.rows = kRows;
  options.columns = kColumns;
  options.sweeps_per_epoch = sweeps_per_epoch;
  options.max_epochs = max_epochs;
  options.tolerance = tolerance;
  options.output_file = "";
  return options;
}

RunSummary run(const Communicator& comm, const jobs::HeatDiffusionOptions& job_options,
               const std::filesystem::path& directory, ResumeRequest resume, Workspace& workspace,
               std::optional<std::int64_t> num_epochs = std::nullopt,
               ArrayIo array_io = ArrayIo::kAuto) {
  RunOptions options;
  options.checkpoint_dir = directory;
  options.resume = resume;
  options.num_epochs = num_epochs;
  options.array_io = array_io;
  return JobRunner(jobs::make_heat_diffusion(job_options), comm, options).run(workspace);
}

// The whole grid on rank 0, each rank's block put where the job's decomposition (a 2-D process
// grid as MPI_Dims_create chooses it) places it; empty elsewhere.
std::vector<double> gather_field(const Communicator& comm, const Workspace& workspace) {
  const auto parts = comm.gather(workspace.get(jobs::kHeatField).raw());
  std::vector<double> grid;
  if (!comm.is_root()) {
    return grid;
  }
  grid.resize(std::size_t(kRows * kColumns));
  const auto processes = process_grid(comm.size(), 2);
  for (int rank = 0; rank < comm.size(); ++rank) {
    const auto block = grid_block(Shape{kRows, kColumns}, processes, rank);
    const auto& part = parts[std::size_t(rank)];
    EXPECT_EQ(part.size(), block.element_count() * sizeof(double)) << "rank " << rank;
    for (std::uint64_t i = 0; i < block.count[0]; ++i) {
      std::memcpy(&grid[(block.start[0] + i) * kColumns + block.start[1]],
                  part.data() + i * block.count[1] * sizeof(double),
                  block.count[1] * sizeof(double));
    }
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

// The mean as the job defines it: each row summed left to right, the row sums in row order.
double mean_by_rows(const std::vector<double>& grid, std::size_t columns) {
  double total = 0;
  for (std::size_t i = 0; i < grid.size(); i += columns) {
    double row = 0;
    for (std::size_t j = 0; j < columns; ++j) {
      row += grid[i + j];
    }
    total += row;
  }
  return total / double(grid.size());
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
    ASSERT_EQ(grid.size(), std::size_t(kRows * kColumns));
    // Converged: a sweep would change nothing by more than the tolerance, and the maximum
    // principle holds (every cell between the boundary temperatures 0 and 1).
    EXPECT_LT(residual(grid, kColumns, options.top_temperature), options.tolerance);
    for (const double cell : grid) {
      EXPECT_TRUE(cell > 0 && cell < 1) << cell;
    }
    const auto written = nlohmann::json::parse(read_file(scratch / "summary.json"));
    EXPECT_EQ(written["epoch"], summary.last_epoch);
    EXPECT_EQ(written["ranks"], world.size());
    EXPECT_EQ(written["process_grid"], nlohmann::json(process_grid(world.size(), 2)));
    EXPECT_EQ(written["rows"], kRows);
    EXPECT_EQ(written["columns"], kColumns);
    EXPECT_EQ(written["sweeps"], 50 * summary.last_epoch);
    EXPECT_EQ(written["mean"].get<double>(), mean_by_rows(grid, kColumns));
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

// Each save's metrics line says which way the field reached the file: each rank its band of rows
// directly on a local ext4 or XFS, one collective MPI-IO write for a 2-D grid's blocks, when
// asked for, or elsewhere; the checkpoints hold the same field.
TEST(HeatDiffusion, EverySavesMetricsSayHowTheFieldWasWrittenAndEitherWayHoldsTheSameField) {
  const auto world = Communicator::world();
  ScratchDir scratch(world);
  const auto options = small_grid(3, 2);
  Workspace by_ranks;
  run(world, options, scratch / "auto", ResumeRequest::from_scratch(), by_ranks);
  Workspace collectively;
  run(world, options, scratch / "mpiio", ResumeRequest::from_scratch(), collectively, std::nullopt,
      ArrayIo::kMpiIo);
  EXPECT_EQ(by_ranks.blobs(), collectively.blobs());
  if (!world.is_root()) {
    return;
  }
  const bool own_blocks = direct_writes_safe(file_system_kind(scratch.path()));
  // 4 ranks split the field in a 2 x 2 grid: interleaved blocks, written collectively.
  const std::string by_rank_path = world.size() <= 3 ? "direct" : "mpiio";
  for (const auto& [run, path] :
       {std::pair<std::string, std::string>{"auto", own_blocks ? by_rank_path : "mpiio"},
        std::pair<std::string, std::string>{"mpiio", "mpiio"}}) {
    std::istringstream lines(read_file(scratch / run / "metrics.jsonl"));
    int saves = 0;
    for (std::string line; std::getline(lines, line);) {
      const auto parsed = nlohmann::json::parse(line);
      if (parsed.at("event") == "epoch") {
        EXPECT_EQ(parsed.at("array_io"), (nlohmann::json{{"field", path}})) << run << ": " << line;
        ++saves;
      }
    }
    EXPECT_EQ(saves, 3) << run;
    for (std::int64_t epoch = 0; epoch <= 2; ++epoch) {
      EXPECT_TRUE(CheckpointReader(CheckpointDirectory(scratch / "auto").file_for(epoch))
                      .read_array("field") ==
                  CheckpointReader(CheckpointDirectory(scratch / "mpiio").file_for(epoch))
                      .read_array("field"))
          << "epoch " << epoch;
    }
  }
}

TEST(HeatDiffusion, AllRanksComputeBitForBitWhatOneRankComputesOnTheSameGrid) {
  const auto world = Communicator::world();
  const auto options = small_grid(9, 5);
  Workspace parallel;
  run(world, options, "", ResumeRequest::from_scratch(), parallel);
  const auto grid = gather_field(world, parallel);
  // Replicated: every rank holds the same values.
  for (const auto* name : {jobs::kHeatSweeps, jobs::kHeatMaxChange, jobs::kHeatGlobalSummary}) {
    const auto bytes = parallel.get(name).raw();
    for (const auto& other : world.allgather(std::span<const std::byte>(bytes))) {
      EXPECT_TRUE(std::ranges::equal(other, bytes)) << name;
    }
  }

  if (world.is_root()) {
    // The same grid, all of it on one rank: no halo exchange at all.
    Workspace serial;
    run(Communicator::self(), options, "", ResumeRequest::from_scratch(), serial);
    const auto cells = serial.get(jobs::kHeatField).as<double>();
    ASSERT_EQ(grid.size(), cells.size());
    EXPECT_EQ(std::memcmp(grid.data(), cells.data(), grid.size() * sizeof(double)), 0)
        << "the halo exchange lost or misplaced a row or a column";
    EXPECT_EQ(parallel.get(jobs::kHeatMaxChange), serial.get(jobs::kHeatMaxChange));
    // Mean, max and min: the same bits, the mean summed in one order at any rank count.
    EXPECT_EQ(parallel.get(jobs::kHeatGlobalSummary), serial.get(jobs::kHeatGlobalSummary));
    EXPECT_EQ(serial.get(jobs::kHeatGlobalSummary).as<double>()[0], mean_by_rows(grid, kColumns));
  }
  world.barrier();
}

// A rank needs a row and a column of its own; on a grid too small for the process grid the run
// is refused on every rank with one message.
TEST(HeatDiffusion, AGridSmallerThanTheProcessGridIsAUsageError) {
  const auto world = Communicator::world();
  if (world.size() < 2) {
    GTEST_SKIP() << "one rank holds any grid";
  }
  auto options = small_grid(1, 1);
  options.rows = process_grid(world.size(), 2)[0] - 1;
  options.columns = 100;
  Workspace workspace;
  try {
    run(world, options, "", ResumeRequest::from_scratch(), workspace);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot be split over"), std::string::npos)
        << error.what();
  }
}

TEST(HeatDiffusion, OutOfRangeOptionsAreUsageErrors) {
  auto with = [](auto change) {
    auto options = small_grid(1, 1);
    change(options);
    return options;
  };
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.columns = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.rows = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.rows = (1 << 24) + 1; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.sweeps_per_epoch = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.max_epochs = 0; })), UsageError);
  EXPECT_THROW(jobs::validate(with([](auto& o) { o.tolerance = -1; })), UsageError);
  EXPECT_NO_THROW(jobs::validate(jobs::HeatDiffusionOptions{}));
}

}  // namespace
}  // namespace epochrun::testing
