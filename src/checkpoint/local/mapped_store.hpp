// A node-local copy's large values stored into its file through a shared mapping, on a file
// system that keeps its files in memory (tmpfs, where --local-dir usually is). Internal to the
// library.
//
// Why not pwrite: the copy must carry each value's hash, and hashing a piece brings it into the
// CPU cache. Through a mapping, each piece is stored right after its hash, from the cache, with
// non-temporal stores (each line of the file's pages written once, not read into the cache
// first); a pwrite after the hash has the kernel copy the piece with its own stores. Measured on
// tmpfs here (3 ranks x 256 MiB on 2 cores, pieces of 64 KiB): 0.78 to 0.80 of the time of the
// same bytes written by pwrite in 1 MiB pieces, each hashed before its write (pieces of 16 KiB
// to 4 MiB did no better), where without the hash the two ways differ by 5%
// (docs/benchmarks.md, "The node-local level").
//
// Only on tmpfs, and only over pages the file holds already (a spare written over, which is
// every copy after a run's first): a mapping of a disk file would read what the disk holds of
// each page it maps; a page allocated at a store that finds the file system full is a SIGBUS,
// where a write fails with ENOSPC; and allocating the pages first (fallocate) zeroes each one,
// a pass more than a write into a new file makes. Everything else goes out with the copy's
// writes (StreamingWriter).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "blob_view.hpp"

namespace epochrun {

class MappedStore {
 public:
  // Whether the file open as `fd` is on a file system the store suits (tmpfs).
  static bool suits(int fd);
  static bool suits(const std::filesystem::path& directory);

  // Stores into the file open (read-write) as `fd`; `what` names it in errors.
  MappedStore(int fd, std::string what);

  // Whether `bytes` at `offset` go through the mapping: the file holds their pages already, and
  // they are a piece at least (a smaller value costs a mapping for little to gain).
  bool takes(std::uint64_t offset, std::uint64_t bytes) const {
    return bytes >= kAtLeast && offset + bytes <= allocated_;
  }

  // Stores `blob` at `offset`, which takes(), and returns its xxh64: computed as it is stored,
  // unless it came with the blob. Throws Error when it cannot map the file, or when the blob has
  // an expected hash and its bytes hash to another (they were stored, but the copy must fail).
  std::uint64_t store(std::uint64_t offset, const BlobView& blob);

 private:
  static constexpr std::uint64_t kAtLeast = std::uint64_t{1} << 20;
  // A window of the file mapped at a time: a mapping's pages count as the process's resident
  // memory while it lasts, and a value of many GiB mapped whole could pass an address-space
  // limit that a cluster sets on its jobs.
  static constexpr std::uint64_t kWindow = std::uint64_t{64} << 20;
  // The piece hashed, then stored while it is still in the CPU cache.
  static constexpr std::size_t kPiece = std::size_t{64} << 10;

  int fd_;
  std::string what_;
  // The file's bytes from its start whose pages it holds (a spare's whole length; none of a new
  // file's).
  std::uint64_t allocated_ = 0;
};

}  // namespace epochrun
