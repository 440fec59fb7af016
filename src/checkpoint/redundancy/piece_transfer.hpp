// Byte ranges of node-local files moved between ranks over MPI (recovery_plan.hpp's pieces), in
// bounded chunks and bounded in time (bounded_exchange.hpp): what restores and protects the
// node-local copies across hosts (local_redundancy.hpp). Internal to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "recovery_plan.hpp"

namespace epochrun {

// The tags of the redundancy's point-to-point messages: kRedundancyTag and up (a set's ring
// step adds its number, at most kMaxSetSize), apart from the roll call's (roll_call.cpp) and any
// small tag a job's own messages use.
inline constexpr int kRedundancyTag = 7400;

// What a chunk is at most: the memory a transfer holds is a chunk per piece of a round (a
// restart's rebuild of an XOR part receives a piece from every other member of its set).
inline constexpr std::size_t kRedundancyChunk = std::size_t{4} << 20;

// What a chunk of the protection is at most (local_redundancy.hpp): it holds two chunks a rank
// (one sent, one received) whatever the set size, and every round is a meeting of the ranks,
// which in rounds of 4 MiB took most of the partner exchange's time (bench --redundancy's
// steps: its transfer 2.5 times one MPI_Sendrecv of the same bytes; in rounds of 16 MiB about
// as long).
inline constexpr std::size_t kProtectionChunk = std::size_t{16} << 20;

struct PieceTransfer {
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  // This rank's first failure (a source it could not read, a chunk `receive` refused): the
  // transfer went on with zeros or discarded bytes, so that no peer waits for this rank; the
  // caller agrees on it.
  std::exception_ptr failure;
};

// This thread's buffer number `slot` of at least `size` bytes, kept for the thread's life and
// reused by every later transfer: fresh memory costs a page fault a page (on a virtual machine
// whose host takes freed memory back, one in the host too), which measured here (bench
// --redundancy) more than moving the bytes over MPI. A span into it, valid until the next call
// with the same slot.
std::span<std::byte> chunk_buffer(std::size_t slot, std::size_t size);

// Runs `step` unless `failure` is set already, keeping its first failure there: a rank that
// failed still takes part in every transfer, so that no peer waits for it.
template <typename Step>
void keep_first_failure(std::exception_ptr& failure, Step&& step) {
  if (failure) {
    return;
  }
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
  }
}

// What a transfer hands a chunk of a piece to: (piece, offset within the piece, bytes).
using PieceChunk = std::function<void(const Piece&, std::uint64_t, std::span<const std::byte>)>;

// Collective among the ranks `pieces` names (the same list, in the same order, on each): this
// rank reads its pieces (from == its rank) of the files in `dir` and sends them, and hands each
// chunk of a piece sent to it to `receive`, and, when given, each chunk it read and sent to
// `sent` (in order within a piece: the sender hashes what it sent in the same pass that reads
// it). Chunk c of every piece moves in round c. Where the time goes is added to the step times
// (step_times.hpp): "read", "transfer" and "write" (`receive`'s).
PieceTransfer transfer_pieces(const Communicator& comm, const std::filesystem::path& dir,
                              const std::vector<Piece>& pieces,
                              std::chrono::duration<double> timeout, const std::string& context,
                              const PieceChunk& receive, const PieceChunk& sent = {},
                              std::size_t chunk = kRedundancyChunk);

}  // namespace epochrun
