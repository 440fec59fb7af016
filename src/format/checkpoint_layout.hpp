// A checkpoint file's HDF5 side: its groups, attributes and datasets, and where each blob's
// bytes lie. Internal to the library.
//
// HDF5 is used serially, by one process, for the layout and the metadata only; the blobs'
// bytes (and their checksums) are moved with pwrite/pread at the datasets' offsets by the rank
// that owns them. So no collective HDF5 or MPI-IO call is ever made, and a rank that fails
// cannot leave the others inside one (parallel HDF5 1.10 has no symmetric error path: they
// would wait forever).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "direct_io.hpp"
#include "epochrun/checkpoint_format.hpp"
#include "integrity_header.hpp"

namespace epochrun {

// A checkpoint's header and where its bytes lie.
struct CheckpointLayout {
  CheckpointHeader header;
  // Per node, the file offset of each blob's bytes in save order (0 for a blob of no bytes).
  std::map<std::string, std::vector<std::uint64_t>> offsets;
  // Version 2, per node: whether each blob (in save order) is in the node's pack.
  std::map<std::string, std::vector<bool>> packed;
  // Version 2, per node with blobs: the file offset of its checksum table (the xxh64 of each
  // blob, uint64 little-endian in save order), which the rank owning the node writes.
  std::map<std::string, std::uint64_t> checksum_offsets;
  std::uint64_t user_block_size = 0;
  // The raw-data extents, sorted: what the integrity header records.
  std::vector<DataExtent> extents;
};

// Datasets from this size start on a kDirectIoAlignment boundary in the file.
inline constexpr std::uint64_t kAlignDatasetsFrom = 1 << 20;

// Blobs under this size share their node's pack when the node has at least kPackFromCount of
// them (docs/FORMAT.md, "Packed blobs").
inline constexpr std::uint64_t kPackBelowBytes = 64 * 1024;
inline constexpr std::size_t kPackFromCount = 32;

// The format versions the writers write: version 2 (save_checkpoint_v2, for the tests of that
// version's readers) and version 3 (every save, kCheckpointFormatVersion).
inline constexpr std::int64_t kFormatVersion2 = 2;
inline constexpr std::int64_t kFormatVersion3 = 3;

// Which of a node's blobs (in save order) go in its pack rather than their own dataset.
std::vector<bool> packed_blobs(const std::vector<BlobRecord>& records);

// Lays out the checkpoint `header` describes (format version 2) in the empty file open
// read-write as `fd`: user block (left for the integrity header), root attributes, every
// node's groups, blob index, pack, own datasets and checksum table -- contiguous, allocated
// now, never filled. Closes HDF5's view of it (the file then has its final size) and returns
// where each blob's bytes and each node's checksums go. `created` runs once HDF5 has created
// (truncated) the file, before it writes anything to it. Throws Hdf5Error.
CheckpointLayout lay_out_checkpoint_file(int fd, CheckpointHeader header,
                                         const std::function<void()>& created);

// Reads the header (checksums included) and the blobs' offsets of the checkpoint file open as
// `fd`, of format version 1 or 2, whose integrity header `integrity` was verified. Before any
// data is read, refuses (CorruptCheckpoint) every dataset whose layout is not the one epochrun
// writes -- external storage, virtual, compact or chunked layout, filters --, any blob whose
// bytes are not inside exactly one of the integrity header's extents (packed blobs: inside
// their pack, none overlapping), an index or checksum table that does not match its node, and
// another format version.
CheckpointLayout read_checkpoint_layout(int fd, const IntegrityHeader& integrity);

}  // namespace epochrun
