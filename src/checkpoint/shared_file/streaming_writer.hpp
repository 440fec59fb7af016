// The data step's I/O engine: one rank's blobs written at their offsets in the checkpoint file,
// each hashed while it streams. Internal to the library.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "blob_view.hpp"
#include "direct_io.hpp"

namespace epochrun {

// Writes blobs at their offsets, each hashed while it streams (one pass: a piece is hashed
// while it is still in the CPU cache) unless its hash came with it. Large blobs go in pieces
// straight from their memory; small ones adjacent in the file (a pack) are gathered and
// written together. Every kWritebackBytes written through the page cache, it asks the kernel
// to start writing them to the disk (sync_file_range, no wait): the disk works while the next
// pieces are copied, instead of all at the final fsync (measured, docs/benchmarks-history.md, "The
// targets": a 3 x 256 MiB save went from 1.35 to under 1 times a plain pwrite + fsync). A blob
// marked direct goes to `direct_fd` (O_DIRECT; -1: none) in its aligned part, the rest through the
// cache.
class StreamingWriter {
 public:
  // What follows the write: an fsync (the hints above make it cheaper), or nothing (a cache
  // such as a node-local copy, which the kernel writes back in its own time: a hint would only
  // make the save wait for the disk).
  enum class Then { kFsync, kNothing };

  // `what` names the file in errors.
  StreamingWriter(int fd, int direct_fd, std::string what, Then then = Then::kFsync)
      : fd_(fd),
        direct_fd_(direct_fd),
        what_(std::move(what)),
        hint_writeback_(then == Then::kFsync) {}

  // Returns the blob's xxh64. Throws Error when the blob has an expected hash and its bytes
  // hash to another (they were written, but the save must fail).
  std::uint64_t write(std::uint64_t offset, const BlobView& blob);

  // Writes what small blobs are still gathered; call it after the last write().
  void flush();

  std::uint64_t direct_bytes() const { return direct_bytes_; }

  // Whether write() may send `blob` to the direct descriptor: marked direct, at least a piece
  // long (a smaller one is gathered with its neighbours), its memory page-aligned. A save none
  // of whose blobs may needs no direct descriptor.
  static bool may_write_directly(const BlobView& blob) {
    return blob.direct && blob.bytes.size() >= kPiece &&
           reinterpret_cast<std::uintptr_t>(blob.bytes.data()) % kDirectIoAlignment == 0;
  }

 private:
  static constexpr std::size_t kPiece = 1 << 20;
  // As large as a write goes (Linux takes at most 2 GiB less a page in one): on ext4 the direct
  // writes of the ranks into one file take its lock in turns, each waiting for the disk, and
  // a larger write keeps more of it in flight (3 x 256 MiB, docs/benchmarks.md: 0.63 s in
  // 8 MiB writes, 0.58 s in 64 MiB ones, 0.48 s in one write each).
  static constexpr std::size_t kDirectPiece = std::size_t{1} << 30;
  static constexpr std::uint64_t kWritebackBytes = 8 << 20;

  // `sum`, the blob's hash, unless it is not the hash the blob must have (Error).
  std::uint64_t checked(const BlobView& blob, std::uint64_t sum) const;
  // A blob under kPiece: added to the gathered bytes, which are written first when it does
  // not follow them in the file or they reached kPiece.
  void gather(std::uint64_t offset, std::span<const std::byte> bytes);
  // Writes through the page cache, with a writeback hint every kWritebackBytes.
  void put(std::uint64_t offset, std::span<const std::byte> bytes);
  // Writes `bytes` (aligned) with direct I/O, hashing them when asked; returns how many it
  // wrote: all of them, or fewer when the file system refuses direct I/O for them (EINVAL:
  // the caller writes the rest through the cache, and so does every later blob).
  std::size_t write_direct(std::uint64_t offset, std::span<const std::byte> bytes, bool hash);

  int fd_;
  int direct_fd_;
  std::string what_;
  bool hint_writeback_;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state_{XXH64_createState(),
                                                                    XXH64_freeState};
  std::vector<std::byte> gathered_;
  std::uint64_t gathered_at_ = 0;
  // Written through the cache since the last writeback hint: how many bytes, and their range.
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t pending_from_ = 0;
  std::uint64_t pending_to_ = 0;
  std::uint64_t direct_bytes_ = 0;
};

}  // namespace epochrun
