// `epochrun bench --local-dir DIR`: the node-local level (docs/CLUSTERS.md, "Levels") measured.
// Its node-local save (every rank's copy into DIR, the agreement, rank 0's manifest in --dir)
// against the raw write of the same bytes over a file of each rank's in DIR (and that write
// hashing what it writes, that write into a new file, and on tmpfs the same bytes hashed and
// stored through a mapping as the save stores them), in rounds whose order alternates;
// and, with --job, the job run with --local-dir --flush-every 10 against the
// same run flushing every checkpoint: their times, and the bytes each left in the checkpoint
// directory (what the shared file system carried).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "bench/job_bench.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// The target: a node-local save against its raw write.
inline constexpr double kLocalSaveTarget = 1.15;

// Collective. Rows: local_save against local_write_limit (kLocalSaveTarget);
// local_save_over_hashed_write, the save against local_hashed_write (the raw write hashing each
// piece), and local_hashed_write against the raw write: how much of the save's cost is the
// checksum; local_new_file_write; the limit itself; on tmpfs, where the save stores its values
// through a mapping (mapped_store.hpp), local_save_over_mapped_write, the save against those
// stores alone (local_mapped_write: what the level adds to them), and local_mapped_write
// against the hashed write; local_save_steps, rank 0's median seconds per step of a save;
// with a job (job.job not empty), job_flush_every_10_run against job_flush_every_1_run, with
// shared_bytes of each and their ratio.
nlohmann::json measure_local_levels(const Communicator& comm,
                                    const std::filesystem::path& directory,
                                    const std::filesystem::path& local_dir,
                                    std::uint64_t bytes_per_rank, std::int64_t blobs,
                                    const JobBenchOptions& job, MeasureSettings& settings);

}  // namespace epochrun::cli
