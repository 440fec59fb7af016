#include "verified_read.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <memory>

#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "fresh_memory.hpp"
#include "regular_file.hpp"

namespace epochrun {

// Blobs come from the file as their raw bytes, and the format stores them little-endian
// (docs/FORMAT.md).
static_assert(std::endian::native == std::endian::little,
              "checkpoint data is read as raw little-endian bytes");

void check_checksum(std::uint64_t actual, const BlobRecord& record, const std::string& what) {
  if (actual != record.xxh64) {
    throw CorruptCheckpoint(what + ": checksum mismatch (stored xxh64 " +
                            std::to_string(record.xxh64) + ", data hashes to " +
                            std::to_string(actual) + ")");
  }
}

// Piece by piece, the fresh memory is made resident, read into and hashed, each while it is
// still in the CPU cache (a second pass over a large blob would read it from memory again).
// A blob under kPopulateFrom is not made resident first: the C library hands out such small
// blocks from its heap, and calloc has zeroed them, so they are resident already, and the
// madvise would be a system call for nothing (at most 32 page faults to save) on every rank of
// a load of small state, where each microsecond counts (docs/scaling.md).
Blob read_verified_blob(int fd, const BlobRecord& record, std::uint64_t offset,
                        const std::string& what) {
  constexpr std::size_t kPiece = 4 << 20;
  constexpr std::size_t kPopulateFrom = 128 << 10;  // glibc's smallest mmap threshold
  Blob blob(record.dtype, record.shape);
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  auto bytes = blob.raw();
  read_or_corrupt([&] {  // an unreadable checkpoint is not a usable one
    for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
      const auto piece = bytes.subspan(at, std::min(kPiece, bytes.size() - at));
      if (bytes.size() >= kPopulateFrom) {
        populate_for_writing(piece);
      }
      read_at(fd, offset + at, piece, what);
      XXH64_update(state.get(), piece.data(), piece.size());
    }
  });
  check_checksum(XXH64_digest(state.get()), record, what);
  return blob;
}

void hash_file_range(int fd, std::uint64_t offset, std::uint64_t bytes,
                     std::span<std::byte> scratch, XXH64_state_t* state, const std::string& what) {
  while (bytes > 0) {
    const auto piece =
        scratch.first(static_cast<std::size_t>(std::min<std::uint64_t>(bytes, scratch.size())));
    read_at(fd, offset, piece, what);
    XXH64_update(state, piece.data(), piece.size());
    offset += piece.size();
    bytes -= piece.size();
  }
}

void verify_stored_blob(int fd, const BlobRecord& record, std::uint64_t offset,
                        const std::string& what, std::span<std::byte> scratch) {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  read_or_corrupt([&] {  // an unreadable checkpoint is not a usable one
    hash_file_range(fd, offset, record.byte_size(), scratch, state.get(), what);
  });
  check_checksum(XXH64_digest(state.get()), record, what);
}

std::vector<Blob> read_verified_blobs(int fd, std::span<const BlobRecord> records,
                                      std::span<const std::uint64_t> offsets,
                                      const std::function<std::string(std::size_t)>& what) {
  constexpr std::uint64_t kRun = 4 << 20;
  std::vector<Blob> blobs;
  blobs.reserve(records.size());  // the buffers below point into these blobs: never moved
  std::vector<std::span<std::byte>> buffers;
  for (std::size_t first = 0; first < records.size();) {
    if (records[first].byte_size() >= kRun) {
      blobs.push_back(read_verified_blob(fd, records[first], offsets[first], what(first)));
      ++first;
      continue;
    }
    std::size_t end = first + 1;
    std::uint64_t bytes = records[first].byte_size();
    while (end < records.size() && bytes + records[end].byte_size() <= kRun &&
           offsets[end] == offsets[first] + bytes) {
      bytes += records[end].byte_size();
      ++end;
    }
    buffers.clear();
    for (std::size_t i = first; i < end; ++i) {
      buffers.push_back(blobs.emplace_back(records[i].dtype, records[i].shape).raw());
    }
    // An unreadable checkpoint is not a usable one.
    read_or_corrupt([&] { read_at(fd, offsets[first], buffers, what(first)); });
    for (; first < end; ++first) {
      const auto raw = blobs[first].raw();
      const auto actual = XXH64(raw.data(), raw.size(), 0);
      if (actual != records[first].xxh64) {
        check_checksum(actual, records[first], what(first));
      }
    }
  }
  return blobs;
}

}  // namespace epochrun
