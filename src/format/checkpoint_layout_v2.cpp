// Reading version 2 checkpoints (docs/FORMAT.md): per node, the blob index
// /index/<node>/blobs, the pack /index/<node>/packed, the checksum table /index/<node>/xxh64,
// and a dataset /nodes/<node>/<blob> for each blob that is not packed.
#include <algorithm>
#include <optional>

#include "blob_index.hpp"
#include "checkpoint_groups.hpp"
#include "checkpoint_layout_readers.hpp"
#include "epochrun/errors.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"

namespace epochrun {
namespace {

using h5::Handle;

bool is_uint(hid_t dataset, std::size_t size, const std::string& what) {
  Handle type(H5Dget_type(dataset), "get type of " + what);
  return H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE &&
         H5Tget_size(type.get()) == size;
}

// A node's pack: its file offset and size, or nothing when it has none.
struct Pack {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

Pack read_pack(hid_t index_group, const std::string& node) {
  const std::string what = "pack /" + std::string(kIndexGroup) + "/" + node + "/packed";
  auto dataset = h5::open_child(index_group, "packed", true, what);
  h5::check_storage(dataset.get(), what);
  const auto shape = h5::shape_of(dataset.get(), what);
  if (!is_uint(dataset.get(), 1, what) || shape.size() != 1) {
    throw CorruptCheckpoint(what + " is not a one-dimensional uint8 dataset");
  }
  return Pack{shape[0] > 0 ? h5::offset_of(dataset.get(), what) : 0, shape[0]};
}

// Reads the checksums into `records` and returns the table's offset.
std::uint64_t read_checksums(hid_t index_group, const std::string& node,
                             std::vector<BlobRecord>& records) {
  const std::string what = "checksum table /" + std::string(kIndexGroup) + "/" + node + "/xxh64";
  auto dataset = h5::open_child(index_group, "xxh64", true, what);
  h5::check_storage(dataset.get(), what);
  if (!is_uint(dataset.get(), 8, what) ||
      h5::shape_of(dataset.get(), what) != Shape{records.size()}) {
    throw CorruptCheckpoint(what + " is not a uint64 table of one checksum per blob (" +
                            std::to_string(records.size()) + ")");
  }
  std::vector<std::uint64_t> sums(records.size());
  h5::check(H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, sums.data()),
            "read " + what);
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i].xxh64 = sums[i];
  }
  return h5::offset_of(dataset.get(), what);
}

// Packed blobs lie inside the pack and never overlap (each is verified by its own checksum,
// but two names for one range would be a forgery, not a checkpoint).
void check_packed_ranges(std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges,
                         const Pack& pack, const std::string& node) {
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t previous_end = 0;
  for (const auto& [offset, size] : ranges) {
    if (offset > pack.size || size > pack.size - offset) {
      throw CorruptCheckpoint("node " + node + ": a packed blob lies outside its pack of " +
                              std::to_string(pack.size) + " bytes");
    }
    if (offset < previous_end) {
      throw CorruptCheckpoint("node " + node + ": packed blobs overlap in its pack");
    }
    previous_end = offset + size;
  }
}

// A blob in its own dataset (`what`), checked against its index row: the offset of its bytes
// (0 when it has none), whose extent is added to the layout's.
std::uint64_t read_dataset_blob(hid_t node_group, const BlobRecord& record, std::uint64_t bytes,
                                const std::string& what, CheckpointLayout& layout) {
  auto dataset = h5::open_child(node_group, record.name, true, what);
  h5::check_storage(dataset.get(), what);
  if (h5::dtype_of(dataset.get(), what) != record.dtype ||
      h5::shape_of(dataset.get(), what) != record.shape) {
    throw CorruptCheckpoint(what + " does not have the dtype and shape its index row says");
  }
  if (bytes == 0) {
    return 0;
  }
  const auto offset = h5::offset_of(dataset.get(), what);
  layout.extents.push_back(DataExtent{offset, bytes});
  return offset;
}

void read_node(hid_t nodes, hid_t index, const std::string& node, CheckpointLayout& layout,
               std::uint64_t file_bytes) {
  auto node_group = h5::open_child(nodes, node, false, "group of node " + node);
  auto index_group = h5::open_child(index, node, false, "index group of node " + node);
  const std::string index_what = "blob index /" + std::string(kIndexGroup) + "/" + node + "/blobs";
  auto rows = read_blob_index(h5::open_child(index_group.get(), "blobs", true, index_what).get(),
                              index_what, file_bytes);
  auto& records = layout.header.blobs[node];
  auto& offsets = layout.offsets[node];
  auto& packed = layout.packed[node];
  records.reserve(rows.size());
  offsets.reserve(rows.size());
  packed.reserve(rows.size());
  std::optional<Pack> pack;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> packed_ranges;
  for (auto& row : rows) {
    BlobRecord record{std::move(row.name), row.dtype, std::move(row.shape), 0};
    // Named only when needed: building thousands of names costs time.
    const auto what = [&] {
      return row.packed ? "packed blob " + node + "/" + record.name
                        : "dataset " + dataset_path(node, record.name);
    };
    const auto bytes = checked_byte_size(record, file_bytes, what);
    if (row.size != bytes) {
      throw CorruptCheckpoint(what() + ": the index says " + std::to_string(row.size) +
                              " bytes, its dtype and shape " + std::to_string(bytes));
    }
    std::uint64_t offset = 0;
    if (row.packed) {
      if (!pack) {
        pack = read_pack(index_group.get(), node);
        if (pack->size > 0) {
          layout.extents.push_back(DataExtent{pack->offset, pack->size});
        }
      }
      packed_ranges.emplace_back(row.offset, bytes);
      offset = bytes > 0 ? pack->offset + row.offset : 0;
    } else {
      offset = read_dataset_blob(node_group.get(), record, bytes, what(), layout);
    }
    records.push_back(std::move(record));
    offsets.push_back(offset);
    packed.push_back(row.packed);
  }
  if (pack) {
    check_packed_ranges(std::move(packed_ranges), *pack, node);
  }
  if (!records.empty()) {
    layout.checksum_offsets[node] = read_checksums(index_group.get(), node, records);
  }
}

// The checksum tables are metadata (covered by the integrity header's metadata hash): they
// must lie in the file, outside every data extent.
void check_checksum_tables(const CheckpointLayout& layout, std::uint64_t file_bytes) {
  for (const auto& [node, table_offset] : layout.checksum_offsets) {
    // A plain copy: lambdas cannot capture a structured binding before C++20 in clang 14.
    const std::uint64_t offset = table_offset;
    const std::uint64_t size = 8 * layout.header.blobs.at(node).size();
    const bool outside_file = size > file_bytes || offset > file_bytes - size;
    const bool in_data =
        std::any_of(layout.extents.begin(), layout.extents.end(), [&](const DataExtent& extent) {
          return offset < extent.offset + extent.length && extent.offset < offset + size;
        });
    if (outside_file || in_data) {
      throw CorruptCheckpoint("the checksum table of node " + node +
                              " lies outside the file or inside blob data");
    }
  }
}

}  // namespace

void read_nodes_v2(hid_t file, CheckpointLayout& layout, std::uint64_t file_bytes) {
  auto nodes = h5::open_child(file, kNodesGroup, false, std::string("group /") + kNodesGroup);
  auto index = h5::open_child(file, kIndexGroup, false, std::string("group /") + kIndexGroup);
  for (const auto& node : layout.header.node_names) {
    read_node(nodes.get(), index.get(), node, layout, file_bytes);
  }
  std::sort(layout.extents.begin(), layout.extents.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
  check_checksum_tables(layout, file_bytes);
}

}  // namespace epochrun
