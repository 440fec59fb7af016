// A node's blob index in a version 2 checkpoint: /index/<node>/blobs, a table with one row per
// blob in save order saying what it is and where its bytes are (docs/FORMAT.md). Internal to
// the library.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// What a blob is (version 3's `kind` column; every blob of a version 2 index is per-node).
enum class StorageKind : std::uint8_t {
  kPerNode = 0,      // every node its own value, of one shape on every node
  kReplicated = 1,   // one value, the same on every node
  kGlobalArray = 2,  // one array of a global shape, each node a block of it
  kRagged = 3,       // every node its own value, of shapes that differ between nodes
};

// The columns of an index: version 2's, or those and `kind` (version 3).
enum class IndexColumns { kVersion2, kWithKind };

struct IndexRow {
  std::string name;
  StorageKind kind = StorageKind::kPerNode;
  DType dtype = DType::kU8;
  Shape shape;
  bool packed = false;       // in the node's pack, else in its own dataset /nodes/<node>/<name>
  std::uint64_t offset = 0;  // in the pack (packed blobs; 0 otherwise)
  std::uint64_t size = 0;    // bytes
};

// What write_blob_index writes of a row: an IndexRow's fields, viewed where they already are.
struct IndexRowView {
  std::string_view name;
  DType dtype = DType::kU8;
  std::span<const std::uint64_t> shape;
  bool packed = false;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  StorageKind kind = StorageKind::kPerNode;
};

// Creates the index dataset `name` in `group` holding `count` rows, row i being row(i) (called
// twice per row: nothing is copied into an intermediate table). Throws Hdf5Error.
void write_blob_index(hid_t group, const char* name, std::size_t count,
                      const std::function<IndexRowView(std::size_t)>& row,
                      IndexColumns columns = IndexColumns::kVersion2);

// The bytes of the index write_blob_index writes for `records` (its rows: the longest name and
// the most dimensions set every row's width), for the estimate of a file's size.
std::uint64_t blob_index_bytes(const std::vector<BlobRecord>& records);

// Reads an index dataset of an untrusted file of `file_bytes` bytes: CorruptCheckpoint naming
// `what` when it is not a table of exactly the columns write_blob_index writes, or claims more
// rows than the file can hold; names, dtypes and shapes are validated, offsets are not (the
// caller bounds them by the pack).
std::vector<IndexRow> read_blob_index(hid_t dataset, const std::string& what,
                                      std::uint64_t file_bytes,
                                      IndexColumns columns = IndexColumns::kVersion2);

// Checksums as an /index xxh64 table stores them: uint64, little-endian.
std::vector<std::byte> checksum_table(const std::vector<std::uint64_t>& sums);

}  // namespace epochrun
