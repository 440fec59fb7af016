#include "piece_transfer.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "bounded_exchange.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"

namespace epochrun {
namespace {

// The source files this rank reads, each opened once.
class OpenSources {
 public:
  explicit OpenSources(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void read(const Piece& piece, std::uint64_t offset, std::span<std::byte> out) {
    auto found = open_.find(piece.file);
    if (found == open_.end()) {
      found = open_.emplace(piece.file, open_regular_file_for_reading(dir_ / piece.file)).first;
    }
    read_at(found->second.get(), piece.offset + offset, out, (dir_ / piece.file).string());
  }

 private:
  std::filesystem::path dir_;
  std::map<std::string, FileDescriptor> open_;
};

}  // namespace

std::span<std::byte> chunk_buffer(std::size_t slot, std::size_t size) {
  thread_local std::vector<std::unique_ptr<std::byte[]>> buffers;
  thread_local std::vector<std::size_t> sizes;
  if (slot >= buffers.size()) {
    buffers.resize(slot + 1);
    sizes.resize(slot + 1);
  }
  if (sizes[slot] < size) {
    buffers[slot] = std::make_unique_for_overwrite<std::byte[]>(size);
    sizes[slot] = size;
  }
  return {buffers[slot].get(), size};
}

PieceTransfer transfer_pieces(const Communicator& comm, const std::filesystem::path& dir,
                              const std::vector<Piece>& pieces,
                              std::chrono::duration<double> timeout, const std::string& context,
                              const PieceChunk& receive, const PieceChunk& sent,
                              std::size_t chunk) {
  const int me = comm.rank();
  std::vector<const Piece*> mine;
  std::uint64_t longest = 0;
  for (const auto& piece : pieces) {
    if (piece.from == me || piece.to == me) {
      mine.push_back(&piece);
      longest = std::max(longest, piece.length);
    }
  }
  PieceTransfer transfer;
  OpenSources sources(dir);
  const auto rounds = (longest + chunk - 1) / chunk;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const auto offset = round * chunk;
    std::size_t used = 0;
    const auto next_buffer = [&](std::size_t size) { return chunk_buffer(used++, size); };
    std::vector<BufferSend> sends;
    std::vector<BufferReceive> receives;
    std::vector<std::pair<const Piece*, std::span<const std::byte>>> received;
    for (const auto* piece : mine) {
      if (offset >= piece->length) {
        continue;
      }
      const auto size =
          static_cast<std::size_t>(std::min<std::uint64_t>(chunk, piece->length - offset));
      if (piece->from == me) {
        const auto bytes = next_buffer(size);
        const auto reading = step_times::Clock::now();
        keep_first_failure(transfer.failure, [&] { sources.read(*piece, offset, bytes); });
        if (transfer.failure) {
          std::fill(bytes.begin(), bytes.end(), std::byte{0});
        } else if (sent) {
          sent(*piece, offset, bytes);
        }
        step_times::add_since("read", reading);
        sends.push_back(BufferSend{piece->to, kRedundancyTag, bytes});
        transfer.bytes_sent += size;
      }
      if (piece->to == me) {
        const auto bytes = next_buffer(size);
        receives.push_back(BufferReceive{piece->from, kRedundancyTag, bytes});
        received.emplace_back(piece, bytes);
        transfer.bytes_received += size;
      }
    }
    const auto transferring = step_times::Clock::now();
    exchange_within(comm, sends, receives, timeout, context);
    step_times::add_since("transfer", transferring);
    const auto writing = step_times::Clock::now();
    for (const auto& [piece, bytes] : received) {
      keep_first_failure(transfer.failure,
                         [&, piece = piece, bytes = bytes] { receive(*piece, offset, bytes); });
    }
    step_times::add_since("write", writing);
  }
  return transfer;
}

}  // namespace epochrun
