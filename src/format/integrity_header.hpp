// The integrity header: a guard that rejects a damaged or foreign checkpoint before libhdf5
// parses a byte of it (libhdf5 is not hardened against crafted files).
//
// It lives in the file's HDF5 user block (bytes the HDF5 format reserves for applications, at
// offset 0; h5py, h5dump and HDF5 itself skip it) and records, little-endian:
//   magic "EPOCHRUN-CKPT-INTEGRITY\n", version, user block size, file size, the extents
//   (offset, length) of every raw-data region, an xxh64 over every byte outside the user block
//   and those extents -- that is, all of HDF5's metadata -- and an xxh64 of the header itself.
// Checking it reads only the metadata bytes, so loads stay at disk speed; the raw data is
// covered by each dataset's own xxh64, checked when it is read. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace epochrun {

struct DataExtent {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct IntegrityHeader {
  std::uint64_t user_block_size = 0;
  std::uint64_t file_size = 0;
  std::uint64_t metadata_xxh64 = 0;
  std::vector<DataExtent> extents;
};

inline constexpr std::uint64_t kIntegrityHeaderVersion = 1;
// Bounds what a crafted header can make a reader allocate or read.
inline constexpr std::uint64_t kMaxUserBlockSize = 64ULL << 20;

// The user block size that holds `extent_count` extents: a power of two, at least 512.
std::uint64_t user_block_size_for(std::size_t extent_count);

std::vector<std::byte> encode_integrity_header(const IntegrityHeader& header);
// Parses a user block's bytes (at least its first 512) of a file of `actual_file_size` bytes.
// Throws CorruptCheckpoint naming what is wrong; never reads outside `bytes`.
IntegrityHeader decode_integrity_header(std::span<const std::byte> bytes,
                                        std::uint64_t actual_file_size);

// Computes the metadata hash of a closed HDF5 file, open read-write as `fd`, and writes the
// header into its user block. `what` names the file in errors. Throws Error.
void seal_checkpoint_file(int fd, const std::string& what, std::uint64_t user_block_size,
                          std::vector<DataExtent> extents);
// Returns the header of the file open as `fd` when it carries a valid header that matches its
// bytes; throws CorruptCheckpoint (or CheckpointMismatch for an intact header of another
// version) naming what is wrong otherwise.
IntegrityHeader verify_checkpoint_file(int fd, const std::string& what);

}  // namespace epochrun
