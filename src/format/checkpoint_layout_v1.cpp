// Reading version 1 checkpoints: one dataset per blob, /nodes/<node>/<blob>, with its xxh64 as
// an attribute, `bytes` as a tagged opaque type; the node's blob list is its `blob_names`
// attribute.
#include <algorithm>

#include "checkpoint_groups.hpp"
#include "checkpoint_layout_readers.hpp"
#include "epochrun/errors.hpp"
#include "h5_attributes.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"

namespace epochrun {
namespace {

using h5::Handle;

constexpr char kBlobNamesAttr[] = "blob_names";
constexpr char kChecksumAttr[] = "xxh64";

// One blob's record and the offset of its bytes.
std::pair<BlobRecord, std::uint64_t> read_record(hid_t node_group, const std::string& node,
                                                 const std::string& name,
                                                 std::uint64_t file_bytes) {
  validate_stored_name(name, "blob name");
  const std::string what = "dataset " + dataset_path(node, name);
  auto dataset = h5::open_child(node_group, name, true, what);
  h5::check_storage(dataset.get(), what);
  BlobRecord record;
  record.name = name;
  record.dtype = h5::dtype_of(dataset.get(), what);
  record.shape = h5::shape_of(dataset.get(), what);
  const auto bytes = checked_byte_size(record, file_bytes, [&] { return what; });
  record.xxh64 = h5::read_uint_attribute(dataset.get(), kChecksumAttr);
  return {std::move(record), bytes > 0 ? h5::offset_of(dataset.get(), what) : 0};
}

}  // namespace

void read_nodes_v1(hid_t file, CheckpointLayout& layout, std::uint64_t file_bytes) {
  auto nodes = h5::open_child(file, kNodesGroup, false, std::string("group /") + kNodesGroup);
  for (const auto& node : layout.header.node_names) {
    auto group = h5::open_child(nodes.get(), node, false, "group of node " + node);
    auto& records = layout.header.blobs[node];
    auto& offsets = layout.offsets[node];
    for (const auto& name :
         h5::read_string_list_attribute(group.get(), kBlobNamesAttr, file_bytes)) {
      auto [record, offset] = read_record(group.get(), node, name, file_bytes);
      if (record.byte_size() > 0) {
        layout.extents.push_back(DataExtent{offset, record.byte_size()});
      }
      records.push_back(std::move(record));
      offsets.push_back(offset);
    }
  }
  std::sort(layout.extents.begin(), layout.extents.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
}

}  // namespace epochrun
