// `epochrun bench --redundancy`: the node-local redundancy of --local-redundancy
// (local_redundancy.hpp), each rank standing for a host of its own, against what the same bytes
// cost at the least, in alternated rounds (docs/benchmarks.md, "Node-local redundancy").
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun::cli {

// The target of every redundancy row: measure / limit at most this (the exchange may cost a
// quarter more than moving the same bytes between the same ranks, or than the memory limit).
inline constexpr double kRedundancyTarget = 1.25;

// Every rank's node-local copy of about `bytes_per_rank` (random bytes), in directories of
// `directory`, rows (name against limit):
//   partner_exchange  protect_local_copies with partner: each copy read, hashed, sent to the
//                     next rank and written there as its partner copy; against
//                     partner_mpi_limit, MPI_Sendrecv of the same bytes between the same ranks
//                     (the target's); and as partner_exchange_with_write against
//                     partner_mpi_write_limit, the same with the received bytes written into a
//                     new file (a partner copy's floor where fresh page-cache pages are dear, as
//                     on a virtual machine)
//   xor_exchange      protect_local_copies with xor:RANKS (one set): the parity blocks reduced
//                     around the ring from the copy files into the parity files; against
//                     xor_mpi_limit, the same ring's sendrecv steps of the same bytes
//   xor_encode        the XOR arithmetic alone, in memory: a copy's n - 1 segments XORed into
//                     a block; against memory_pass_limit, one read and write pass (memcpy) of
//                     the same bytes
// and the limits themselves. Left out on 1 rank (no other "host").
nlohmann::json measure_redundancy(const Communicator& comm, const std::filesystem::path& directory,
                                  std::uint64_t bytes_per_rank, MeasureSettings& settings);

}  // namespace epochrun::cli
