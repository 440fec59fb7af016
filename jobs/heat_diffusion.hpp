// A job with real state: the steady temperature of a plate, by Jacobi sweeps of a 2-D grid.
//
// The grid is `rows` x `columns` cells (the field, f64), one global array
// (Job::global_array) split over a 2-D process grid as MPI_Dims_create would choose it
// (balanced_block): each rank holds a block of rows and columns. The grid's size is fixed by
// the options, not by the rank count, so that a checkpoint resumes on any number of ranks; the
// default, 512 x 1024 (4 MiB), keeps a default run small and fast. (It replaced mib_per_rank,
// which sized each rank's part: a grid whose size depends on the rank count it started with
// cannot be the same problem after a resume on another count.)
//
// Each sweep replaces every cell by the mean of its four neighbours, computed as
// 0.25 * ((up + down) + (left + right)) from the previous sweep's values only, so a cell's
// arithmetic is the same whatever block it is in. A rank receives the row above and the row
// below its block, and the column left and the column right of it, from the up to four
// neighbouring ranks (halo exchange, Communicator::sendrecv; columns packed into contiguous
// buffers). Outside the grid the temperature is fixed: `top_temperature` above the first row,
// 0 below the last and beside the first and last columns. The field starts as uniform noise in
// [0, 1) drawn from the seed per global cell, so the grid is the same whatever the rank count.
//
// Checkpointed: the field (a global array), the sweep counter and the last sweep's maximum
// change (replicated: the same on every rank). A sweep reads only the field, so a resumed run
// ends bit-identical to an uninterrupted one, a run on any number of ranks bit-identical to one
// on a single rank, and a run resumed on another number of ranks bit-identical to both. The
// maximum change is a maximum over ranks, exact in any order, so the stop decision is the same
// at any rank count. It stops once the maximum change of an epoch's last sweep falls under
// `tolerance`, or after `max_epochs`.
//
// The download group computes the grid's mean, max and min from the field itself, on every
// rank (no per-node summary is kept: it would be state a resume at another rank count has to
// rebuild). The mean does not depend on the decomposition either, bit for bit: each global row
// is summed left to right by the first rank of its process row (the others send it their
// segments), and rank 0 adds the row sums in row order. The exit group writes them to
// `output_file` (JSON).
#pragma once

#include <cstdint>
#include <string>

#include "epochrun/job.hpp"

namespace epochrun::jobs {

struct HeatDiffusionOptions {
  std::int64_t rows = 512;
  std::int64_t columns = 1024;
  std::int64_t sweeps_per_epoch = 10;
  std::int64_t max_epochs = 100;
  double tolerance = 1e-6;
  std::uint64_t seed = 20261122;
  double top_temperature = 1.0;
  std::string output_file = "heat_summary.json";  // empty: do not write
};

// The global array f64[rows, columns]; each rank's workspace holds its block, row-major.
inline constexpr const char* kHeatField = "field";
inline constexpr const char* kHeatSweeps = "sweeps";
inline constexpr const char* kHeatMaxChange = "max_change";
// Every rank, after the download: f64 [mean, max, min] of the whole grid (not checkpointed).
inline constexpr const char* kHeatGlobalSummary = "global_summary";

// Throws UsageError naming the option when a value is out of range.
void validate(const HeatDiffusionOptions& options);
Job make_heat_diffusion(const HeatDiffusionOptions& options);

}  // namespace epochrun::jobs
