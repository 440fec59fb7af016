// What a checkpoint file records about itself (docs/FORMAT.md is the user's description).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/export.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {

inline constexpr const char* kCheckpointFormatName = "epochrun-checkpoint";
// Bumped on any change a reader of the previous version would misread. Version 1 and 2 files
// still load, at the rank count that wrote them; version 2 stores `bytes` as uint8, packs small
// blobs and keeps checksums in a table; version 3 stores one dataset per blob name (per-node
// blobs as rows), replicated blobs and global arrays, and loads at any rank count.
inline constexpr std::int64_t kCheckpointFormatVersion = 3;

// One saved blob as recorded in the file.
struct BlobRecord {
  std::string name;
  DType dtype = DType::kU8;
  Shape shape;
  std::uint64_t xxh64 = 0;  // of the blob's raw bytes, checked on every load
  std::uint64_t byte_size() const { return element_count(shape) * element_size(dtype); }
};

// A global array as recorded in a version 3 file: one array of the global shape, written by
// `writer_blocks.size()` ranks, each its block (index = writer rank), each block's elements
// hashed in the block's own row-major order.
struct GlobalArrayRecord {
  std::string name;
  DType dtype = DType::kU8;
  Shape global_shape;
  std::vector<Block> writer_blocks;
  std::vector<std::uint64_t> writer_xxh64;  // index = writer rank
  std::uint64_t byte_size() const { return element_count(global_shape) * element_size(dtype); }
};

// The root attributes plus every node's blob list.
struct EPOCHRUN_API CheckpointHeader {
  std::string format = kCheckpointFormatName;
  std::int64_t format_version = kCheckpointFormatVersion;
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;  // index = rank
  std::string config_json;              // the run's effective configuration
  // node name -> its blobs, in save order
  std::map<std::string, std::vector<BlobRecord>> blobs;
  // Version 3 only (empty before): the blobs every rank holds the same value of, stored once,
  // and the global arrays, each stored whole. Both in the file's index order (by name).
  std::vector<BlobRecord> replicated;
  std::vector<GlobalArrayRecord> arrays;

  std::int64_t num_ranks() const { return static_cast<std::int64_t>(node_names.size()); }
  // Every per-node value, replicated value and global array.
  std::uint64_t total_blob_bytes() const;
};

}  // namespace epochrun
