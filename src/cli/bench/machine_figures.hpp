// What decides the bench's ratios on the machine it runs on, measured before its rounds: the
// cost of faulting fresh memory in, of a copy from the page cache into memory already touched,
// the disk's write bandwidth with and without early writeback hints, the cores against the
// ranks, transparent huge pages and the file system of the directory measured. A ratio carries
// from one machine to another only when these figures are alike (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// Collective: every rank measures at once with `bytes_per_rank` (fresh memory, a file of its
// own in `directory`, removed after), each figure the median of 3 tries, the order of the plain
// and hinted writes alternating; MB/s are all ranks' bytes over the slowest rank's time. Rank 0's
// row (name "machine"): first_touch_mb_per_s, page_cache_copy_mb_per_s, plain_write_mb_per_s,
// hinted_write_mb_per_s, bytes_per_rank, cores (this host's online CPUs), cpus_allowed (rank
// 0's affinity), ranks, ranks_on_host (rank 0's), transparent_hugepages, file_system,
// load_average (1 minute, before measuring).
nlohmann::json measure_machine(const Communicator& comm, const std::filesystem::path& directory,
                               std::uint64_t bytes_per_rank);

// The row above as the lines printed before the bench's table.
void print_machine(const nlohmann::json& machine);

}  // namespace epochrun::cli
