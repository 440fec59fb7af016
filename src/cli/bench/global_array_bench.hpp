// `epochrun bench --global-arrays`: one 2-D global array of float64, a block per rank over the
// process grid (balanced_block), saved and loaded the way a checkpoint moves it (docs/FORMAT.md,
// format version 3), each against the plain POSIX I/O of the same bytes on the same ranks in the
// same rounds (docs/benchmarks.md, "Global arrays").
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// The targets of a global array's save and load: measure / limit at most these.
inline constexpr double kArraySaveTarget = 1.25;  // collective save vs pwrite + fsync
inline constexpr double kArrayLoadTarget = 1.25;  // collective load vs pread into fresh buffers

// Every rank's block of about `bytes_per_rank` (whole rows of at most 4096 elements), measured
// in `settings.rounds` rounds whose order alternates, rows (name against limit):
//   array_save          write_global_array, rank 0 laying out the HDF5 file first, then
//                       MPI_File_sync; against array_write_limit (kArraySaveTarget)
//   array_save_h5dwrite the same file written by parallel HDF5's collective H5Dwrite of the
//                       same hyperslabs, then MPI_File_sync; against array_write_limit
//   array_load          read_global_array at the same decomposition, every writer block
//                       verified; against array_read_limit (kArrayLoadTarget)
//   array_load_h5dread  parallel HDF5's collective H5Dread of the same hyperslabs (no
//                       checksum); against array_read_limit
//   array_load_fewer_ranks  read_global_array at one rank fewer (the first ranks, their own
//                       balanced blocks) of the file all ranks wrote; against
//                       array_read_limit_fewer_ranks, which preads the same total bytes on
//                       those ranks (kArrayLoadTarget; left out on 1 rank)
// and the limits themselves. Every load is compared with what was saved (untimed).
nlohmann::json measure_global_arrays(const Communicator& comm,
                                     const std::filesystem::path& directory,
                                     std::uint64_t bytes_per_rank, MeasureSettings& settings);

}  // namespace epochrun::cli
