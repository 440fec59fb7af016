#include "streaming_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <thread>

#include "direct_io.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "regular_file.hpp"

namespace epochrun {

std::uint64_t StreamingWriter::write(std::uint64_t offset, const BlobView& blob) {
  const auto bytes = blob.bytes;
  if (bytes.size() < kPiece) {
    gather(offset, bytes);
    return checked(blob, blob.xxh64 ? *blob.xxh64 : XXH64(bytes.data(), bytes.size(), 0));
  }
  flush();
  XXH64_reset(state_.get(), 0);
  std::size_t at = 0;
  std::size_t hashed = 0;  // the bytes from the blob's start that state_ holds already
  if (blob.direct && direct_fd_ >= 0 && offset % kDirectIoAlignment == 0 &&
      reinterpret_cast<std::uintptr_t>(bytes.data()) % kDirectIoAlignment == 0) {
    const auto aligned = bytes.first(bytes.size() / kDirectIoAlignment * kDirectIoAlignment);
    std::thread hasher;
    if (!blob.xxh64) {
      // Hashed beside the write: a direct write leaves the CPU idle while the disk takes the
      // bytes, and hashing after each piece would add its time (a twentieth of the write's,
      // measured) to the save's.
      try {
        hasher = std::thread([&] { XXH64_update(state_.get(), aligned.data(), aligned.size()); });
      } catch (const std::system_error&) {
        // No thread to spare: hashed after each piece instead.
      }
    }
    try {
      at = write_direct(offset, aligned, !blob.xxh64 && !hasher.joinable());
    } catch (...) {
      if (hasher.joinable()) {
        hasher.join();
      }
      throw;
    }
    if (hasher.joinable()) {
      hasher.join();
      hashed = aligned.size();
    } else {
      hashed = at;
    }
  }
  for (; at < bytes.size(); at += kPiece) {
    const auto piece = bytes.subspan(at, std::min(kPiece, bytes.size() - at));
    if (!blob.xxh64 && at + piece.size() > hashed) {
      const auto skip = hashed > at ? hashed - at : 0;
      XXH64_update(state_.get(), piece.data() + skip, piece.size() - skip);
    }
    put(offset + at, piece);
  }
  return checked(blob, blob.xxh64 ? *blob.xxh64 : XXH64_digest(state_.get()));
}

std::uint64_t StreamingWriter::checked(const BlobView& blob, std::uint64_t sum) const {
  if (blob.expected_xxh64 && *blob.expected_xxh64 != sum) {
    throw Error(what_ + ": blob '" + blob.name + "' read back from its copy hashes to " +
                std::to_string(sum) + ", the copy was made with " +
                std::to_string(*blob.expected_xxh64) + " (the copy changed since)");
  }
  return sum;
}

void StreamingWriter::flush() {
  if (!gathered_.empty()) {
    put(gathered_at_, gathered_);
    gathered_.clear();
  }
}

void StreamingWriter::gather(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (bytes.empty()) {
    return;
  }
  if (!gathered_.empty() &&
      (gathered_at_ + gathered_.size() != offset || gathered_.size() >= kPiece)) {
    flush();
  }
  if (gathered_.empty()) {
    gathered_at_ = offset;
  }
  gathered_.insert(gathered_.end(), bytes.begin(), bytes.end());
}

void StreamingWriter::put(std::uint64_t offset, std::span<const std::byte> bytes) {
  write_at(fd_, offset, bytes, what_);
  if (!hint_writeback_) {
    return;
  }
  if (pending_bytes_ == 0) {
    pending_from_ = offset;
    pending_to_ = offset;
  }
  pending_from_ = std::min(pending_from_, offset);
  pending_to_ = std::max(pending_to_, offset + bytes.size());
  pending_bytes_ += bytes.size();
  if (pending_bytes_ >= kWritebackBytes) {
    // Only a hint: where it is refused or fails, the fsync that ends the write still makes
    // every byte durable, and reports what failed.
    (void)::sync_file_range(fd_, static_cast<off_t>(pending_from_),
                            static_cast<off_t>(pending_to_ - pending_from_), SYNC_FILE_RANGE_WRITE);
    pending_bytes_ = 0;
  }
}

std::size_t StreamingWriter::write_direct(std::uint64_t offset, std::span<const std::byte> bytes,
                                          bool hash) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const auto piece = bytes.subspan(at, std::min(kDirectPiece, bytes.size() - at));
    const ssize_t written =
        ::pwrite(direct_fd_, piece.data(), piece.size(), static_cast<off_t>(offset + at));
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written < 0 && errno == EINVAL) {
      direct_fd_ = -1;
      return at;
    }
    if (written <= 0) {
      throw Error(errno_message("write " + what_ + " at byte " + std::to_string(offset + at)));
    }
    if (hash) {
      XXH64_update(state_.get(), piece.data(), static_cast<std::size_t>(written));
    }
    at += static_cast<std::size_t>(written);
    direct_bytes_ += static_cast<std::uint64_t>(written);
    if (at % kDirectIoAlignment != 0) {
      // A short direct write leaves the rest unaligned: the cache takes it.
      direct_fd_ = -1;
      return at;
    }
  }
  return at;
}

}  // namespace epochrun
