// The integrity header: a guard that rejects a damaged or foreign checkpoint before libhdf5
// parses a byte of it (libhdf5 is not hardened against crafted files).
//
// It lives in the file's HDF5 user block (bytes the HDF5 format reserves for applications, at
// offset 0; h5py, h5dump and HDF5 itself skip it) and records, little-endian:
//   magic "EPOCHRUN-CKPT-INTEGRITY\n", version, user block size, file size, the extents
//   (offset, length) of every raw-data region, an xxh64 over every byte outside the user block
//   and those extents -- that is, all of HDF5's metadata -- and an xxh64 of the header itself;
//   then, optionally, a record the format layer keeps there (a version 3 file's layout, so that a
//   load finds it with one read instead of an HDF5 open), with an xxh64 of its own. Readers of
//   the header alone skip the record: a file that carries one reads with every epochrun.
// Checking it reads only the metadata bytes, so loads stay at disk speed; the raw data is
// covered by each dataset's own xxh64, checked when it is read. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace epochrun {

struct DataExtent {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;

  friend bool operator==(const DataExtent&, const DataExtent&) = default;
};

struct IntegrityHeader {
  std::uint64_t user_block_size = 0;
  std::uint64_t file_size = 0;
  std::uint64_t metadata_xxh64 = 0;
  std::vector<DataExtent> extents;
  // The layout record (docs/FORMAT.md, "The layout record"): empty when the file has none (files
  // written before it, or whose layout does not fit the largest user block).
  std::vector<std::byte> layout_record;
  // The metadata hash the record was written with, which binds it to the HDF5 metadata it
  // describes; nullopt for a record of version 1, which does not say. The encoder writes
  // metadata_xxh64 there.
  std::optional<std::uint64_t> record_metadata_xxh64;
};

inline constexpr std::uint64_t kIntegrityHeaderVersion = 1;
// Bounds what a crafted header can make a reader allocate or read.
inline constexpr std::uint64_t kMaxUserBlockSize = 64ULL << 20;

// The user block size that holds `extent_count` extents and a layout record of `record_bytes`
// bytes: a power of two, at least 4096.
std::uint64_t user_block_size_for(std::size_t extent_count, std::size_t record_bytes = 0);
// Whether a header of `extent_count` extents and a layout record of `record_bytes` bytes fit a
// user block of `user_block_size` bytes.
bool fits_user_block(std::size_t extent_count, std::size_t record_bytes,
                     std::uint64_t user_block_size);

std::vector<std::byte> encode_integrity_header(const IntegrityHeader& header);
// Parses a user block's bytes (at least its first 512) of a file of `actual_file_size` bytes,
// the layout record too when `bytes` hold one (its checksum checked; a record of a later version
// is left out, as a file without one). Throws CorruptCheckpoint naming what is wrong; never reads
// outside `bytes`.
IntegrityHeader decode_integrity_header(std::span<const std::byte> bytes,
                                        std::uint64_t actual_file_size);

// Computes the metadata hash of a closed HDF5 file, open read-write as `fd`, and writes the
// header into its user block. `what` names the file in errors. Throws Error.
// `layout_record`, when not empty, goes after the header (it must fit: fits_user_block).
void seal_checkpoint_file(int fd, const std::string& what, std::uint64_t user_block_size,
                          std::vector<DataExtent> extents,
                          std::span<const std::byte> layout_record = {});
// The header of the file open as `fd`, its own checksum and the file's size checked, but not
// the metadata hash (verify_checkpoint_file checks both; no reader uses a file on less: see
// checkpoint_judge.hpp). Throws as verify_checkpoint_file.
IntegrityHeader read_integrity_header(int fd, const std::string& what);
// Returns the header of the file open as `fd` when it carries a valid header that matches its
// bytes; throws CorruptCheckpoint (or CheckpointMismatch for an intact header of another
// version) naming what is wrong otherwise.
IntegrityHeader verify_checkpoint_file(int fd, const std::string& what);

}  // namespace epochrun
