// A version 3 checkpoint file's HDF5 side (docs/FORMAT.md, "Format version 3"): what rank 0 needs
// to lay it out -- one description per blob name, never one per rank and blob -- and where every
// rank's bytes then go, which each rank computes from a few broadcast offsets. Internal to the
// library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "blob_index.hpp"
#include "epochrun/global_array.hpp"
#include "h5_handle.hpp"
#include "integrity_header.hpp"

namespace epochrun {

// One blob name of a version 3 file, as every rank agreed on it.
struct BlobDescription {
  std::string name;
  StorageKind kind = StorageKind::kPerNode;
  DType dtype = DType::kU8;
  // Per-node: each node's shape; replicated: the value's; global array: the global shape;
  // ragged: empty (each node's shape is in its ragged index row).
  Shape shape;
  // Ragged: all nodes' elements together (the length of its one-dimensional dataset).
  std::uint64_t ragged_elements = 0;
  // Global array: each writer rank's block.
  std::vector<Block> writer_blocks;

  // Bytes of one node's value (per-node), of the value (replicated), of the whole array
  // (global array) or of all nodes' values (ragged).
  std::uint64_t value_bytes() const;
  friend bool operator==(const BlobDescription&, const BlobDescription&) = default;
};

// Everything rank 0 lays a version 3 file out from.
struct FileDescription {
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;  // index = rank
  std::string config_json;
  std::vector<BlobDescription> blobs;  // sorted by name
  // The most dimensions any node's value of a ragged blob has (the ragged index's width).
  std::size_t ragged_dimensions = 1;

  std::uint64_t ranks() const { return node_names.size(); }
  friend bool operator==(const FileDescription&, const FileDescription&) = default;
};

// Where a version 3 file's bytes go, the same on every rank.
struct LayoutV3 {
  // Per blob (description order): its dataset's offset (0 when it has no bytes or is packed).
  // Per-node: node r's value is at offset + r * value_bytes.
  std::vector<std::uint64_t> offsets;
  // Per blob: whether it is a per-node blob in the pack, and where it starts in a node's row.
  std::vector<bool> packed;
  std::vector<std::uint64_t> in_pack;
  // The pack (/index/packed, uint8[ranks, pack_row_bytes]); node r's row at
  // pack_offset + r * pack_row_bytes.
  std::uint64_t pack_offset = 0;
  std::uint64_t pack_row_bytes = 0;
  // /index/xxh64: per-node and ragged blobs node-major (node r's checksums of its per-node blobs
  // in description order, at r * per_node_blobs), then one per replicated blob, then one per
  // writer block of each global array.
  std::uint64_t checksums_offset = 0;
  std::uint64_t per_node_blobs = 0;
  // /index/ragged: one row of ragged_row_bytes per (ragged blob, node), ragged blob-major.
  std::uint64_t ragged_index_offset = 0;
  std::uint64_t ragged_row_bytes = 0;
  std::uint64_t user_block_size = 0;
  std::vector<DataExtent> extents;  // sorted

  // Where node `rank`'s checksum of per-node blob `blob` goes.
  std::uint64_t node_checksum_offset(std::uint64_t rank, std::uint64_t per_node_index) const {
    return checksums_offset + 8 * (rank * per_node_blobs + per_node_index);
  }
  friend bool operator==(const LayoutV3&, const LayoutV3&) = default;
};

// Lays out the file `description` describes in the empty file open read-write as `fd`: user
// block, root attributes, one dataset per blob name, the pack, the blob index, the ragged index
// and the checksum table -- contiguous, allocated, never filled. `created` runs once HDF5 has
// created (truncated) the file. Throws Hdf5Error.
LayoutV3 lay_out_checkpoint_file_v3(int fd, const FileDescription& description,
                                    const std::function<void()>& created);

// The HDF5 file type of a ragged index row of `width` dimensions (packed, little-endian).
h5::Handle ragged_row_file_type(std::size_t width);

// One node's value of a ragged blob, as its ragged index row says.
struct RaggedValue {
  Shape shape;
  std::uint64_t offset = 0;  // in bytes, in the blob's dataset
  std::uint64_t size = 0;    // bytes
};

// A version 3 file as a reader found it, every part checked against the others.
struct StoredFileV3 {
  FileDescription description;  // the blobs in index order, the global arrays' writer blocks
  LayoutV3 layout;
  std::vector<std::uint64_t> checksums;          // /index/xxh64, in the order LayoutV3 says
  std::vector<std::vector<RaggedValue>> ragged;  // per ragged blob (index order), per node
};

// Reads the layout of the version 3 file open as `fd`, whose integrity header `integrity` was
// verified: CorruptCheckpoint for anything that does not match what lay_out_checkpoint_file_v3
// writes, before any data is read; CheckpointMismatch for another format version.
StoredFileV3 read_checkpoint_layout_v3(int fd, const IntegrityHeader& integrity);
// The same, or nothing for a file of another version (`version` says which): one HDF5 open
// finds the version and reads a version 3 layout. A file's layout record, when it has one, must
// say the same (CorruptCheckpoint otherwise), so every reader of HDF5 checks it.
std::optional<StoredFileV3> read_checkpoint_layout_if_v3(int fd, const IntegrityHeader& integrity,
                                                         std::int64_t& version);

// The layout from the file's layout record (integrity.layout_record, not empty), with the
// checksum table and the ragged index read with pread from `fd`: no HDF5 open -- the record is
// under a checksum of its own, and every value read later under the checksum table's. Everything
// it says is checked as the HDF5 reader checks what it reads (CorruptCheckpoint). Whether the
// record may stand for the HDF5 metadata at all is the judge's to decide (checkpoint_judge.hpp).
StoredFileV3 read_checkpoint_layout_from_record(int fd, const IntegrityHeader& integrity);

// Where one stored value of blob `blob` (index order) lies: node `rank`'s value of a per-node or
// ragged blob, or the value of a replicated blob (`rank` ignored); its record carries the shape
// and the xxh64 the save recorded.
struct StoredValue {
  BlobRecord record;
  std::uint64_t offset = 0;
  bool packed = false;
};
StoredValue stored_value(const StoredFileV3& stored, std::size_t blob, std::uint64_t rank);

// stored_value for many values of one file: each blob's place among the blobs of its kind (which
// says where its checksum is) is counted once for all blobs, not once per value, so a file of
// 10,000 blobs costs 10,000 steps and not 50 million. `stored` must outlive it.
class StoredValues {
 public:
  explicit StoredValues(const StoredFileV3& stored);
  StoredValue at(std::size_t blob, std::uint64_t rank) const;

 private:
  // Per blob, the blobs before it that are per-node or ragged, replicated, ragged.
  struct Before {
    std::uint64_t per_node = 0;
    std::uint64_t replicated = 0;
    std::size_t ragged = 0;
  };
  const StoredFileV3& stored_;
  std::vector<Before> before_;
};

// The path of a blob's dataset: /nodes/<name>, /replicated/<name> or /arrays/<name>.
std::string dataset_path(const BlobDescription& blob);

// The xxh64 of each writer block of global array `blob` (index order), index = writer rank.
std::vector<std::uint64_t> writer_checksums(const StoredFileV3& stored, std::size_t blob);

// A ragged index row (docs/FORMAT.md, "Format version 3") as the file stores it: ndim (uint8), the
// shape (uint64 x width, zeros past ndim), the value's offset in its dataset and its size (uint64
// bytes), little-endian and packed. Each rank writes its own rows at their places.
std::vector<std::byte> ragged_index_row(const Shape& shape, std::size_t width, std::uint64_t offset,
                                        std::uint64_t size);

}  // namespace epochrun
