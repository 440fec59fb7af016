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

// What a chunk is at most: the memory a transfer holds is a chunk per piece of a round.
inline constexpr std::size_t kRedundancyChunk = std::size_t{4} << 20;

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

// Collective among the ranks `pieces` names (the same list, in the same order, on each): this
// rank reads its pieces (from == its rank) of the files in `dir` and sends them, and hands each
// chunk of a piece sent to it to `receive(piece, offset within the piece, bytes)`. Chunk c of
// every piece moves in round c.
PieceTransfer transfer_pieces(
    const Communicator& comm, const std::filesystem::path& dir, const std::vector<Piece>& pieces,
    std::chrono::duration<double> timeout, const std::string& context,
    const std::function<void(const Piece&, std::uint64_t, std::span<const std::byte>)>& receive,
    std::size_t chunk = kRedundancyChunk);

}  // namespace epochrun
