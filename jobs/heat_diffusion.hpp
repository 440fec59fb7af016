// A job with real state: the steady temperature of a plate, by Jacobi sweeps of a 2-D grid.
//
// The grid is split across ranks by rows: each rank holds `rows_per_rank(options)` rows of
// `columns` cells (the field, f64), so the state per rank is about `mib_per_rank` MiB and the
// whole grid is ranks x rows_per_rank by columns. Each sweep replaces every cell by the mean of
// its four neighbours; a rank receives the row above and the row below its own from the
// neighbouring ranks (halo exchange, Communicator::sendrecv). Outside the grid the temperature is
// fixed: `top_temperature` above the first row, 0 below the last and beside the first and last
// columns. The field starts as uniform noise in [0, 1) drawn from the seed per global cell, so
// the grid is the same whatever the rank count.
//
// Checkpointed: the field, the sweep counter, the last sweep's maximum change and this rank's
// summary (sum, max, min of its cells). A sweep reads only the field, so a resumed run ends
// bit-identical to an uninterrupted one, and a run on any number of ranks bit-identical to one
// on a single rank. It stops once the maximum change of an epoch's last sweep falls under
// `tolerance`, or after `max_epochs`; the download group turns the nodes' summaries into the
// global mean, max and min, and the exit group writes them to `output_file` (JSON).
#pragma once

#include <cstdint>
#include <string>

#include "epochrun/job.hpp"

namespace epochrun::jobs {

struct HeatDiffusionOptions {
  double mib_per_rank = 4;
  std::int64_t columns = 1024;
  std::int64_t sweeps_per_epoch = 10;
  std::int64_t max_epochs = 100;
  double tolerance = 1e-6;
  std::uint64_t seed = 20261122;
  double top_temperature = 1.0;
  std::string output_file = "heat_summary.json";  // empty: do not write
};

inline constexpr const char* kHeatField = "field";
inline constexpr const char* kHeatSweeps = "sweeps";
inline constexpr const char* kHeatMaxChange = "max_change";
// f64 [sum, max, min] of this rank's cells; the declared output.
inline constexpr const char* kHeatLocalSummary = "local_summary";
// Rank 0, after the download: f64 [mean, max, min] of the whole grid.
inline constexpr const char* kHeatGlobalSummary = "global_summary";

// The rows each rank holds: mib_per_rank MiB of f64 in rows of `columns` cells.
std::uint64_t rows_per_rank(const HeatDiffusionOptions& options);
// Throws UsageError naming the option when a value is out of range.
void validate(const HeatDiffusionOptions& options);
Job make_heat_diffusion(const HeatDiffusionOptions& options);

}  // namespace epochrun::jobs
