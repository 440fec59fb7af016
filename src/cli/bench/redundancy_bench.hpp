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
// quarter more than the same work done the plainest way, or than the memory limit).
inline constexpr double kRedundancyTarget = 1.25;

// Every rank's node-local copy of about `bytes_per_rank` (random bytes), in directories of
// `directory`, rows (name against limit):
//   partner_exchange  protect_local_copies with partner: each copy read, hashed, sent to the
//                     next rank and written there as its partner copy; against
//                     partner_same_work_limit (the target's): the copy file read whole, one
//                     MPI_Sendrecv of its bytes between the same ranks, the received bytes
//                     written into a new file, nothing hashed. `steps`: rank 0's median seconds
//                     in each step of the exchange (step_times.hpp: hash, read, transfer,
//                     write, finish, and the agreements by name), where its time goes.
//                     partner_exchange_over_transfer: the same rounds against partner_mpi_limit,
//                     the MPI_Sendrecv alone (no target: it neither reads nor writes a file)
//   xor_exchange      protect_local_copies with xor:RANKS (one set): the parity blocks reduced
//                     around the ring from the copy files into the parity files; against
//                     xor_same_work_limit: the copy file read whole, the ring's sendrecv steps
//                     of the same bytes with the XOR of each step, the block written into a new
//                     file; `steps` as above; xor_exchange_over_transfer against xor_mpi_limit,
//                     the ring's sendrecv steps alone
//   xor_encode        the XOR arithmetic alone, in memory: a segment XORed into a block of its
//                     size (xor_into, as each step of the ring does, n - 2 times a block for a
//                     set of n, and a rebuild); against memory_pass_limit, the XOR's memory
//                     traffic (two blocks read, one written) at the bandwidth of the faster copy
//                     of the segment into the block (memcpy or rep movsb), timed in the same
//                     round: 1.5 times that copy
// and the limits themselves. Left out on 1 rank (no other "host").
nlohmann::json measure_redundancy(const Communicator& comm, const std::filesystem::path& directory,
                                  std::uint64_t bytes_per_rank, MeasureSettings& settings);

}  // namespace epochrun::cli
