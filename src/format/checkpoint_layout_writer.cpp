// Laying out a new checkpoint file (format version 2): its groups, attributes and datasets,
// allocated and never filled, and where each blob's bytes go.
#include <algorithm>
#include <utility>

#include "blob_index.hpp"
#include "checkpoint_groups.hpp"
#include "checkpoint_layout.hpp"
#include "checkpoint_layout_internal.hpp"
#include "checkpoint_root_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_library.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// One node: its pack (packed blobs in save order, back to back), its own datasets, its index
// and its checksum table.
void lay_out_node(hid_t nodes, hid_t index, const std::string& node, hid_t dcpl,
                  CheckpointLayout& layout) {
  const auto& records = layout.header.blobs.at(node);
  auto packed = packed_blobs(records);
  auto node_group = create_group(nodes, node);
  auto index_group = create_group(index, node);
  std::vector<std::uint64_t> sizes;  // each blob's bytes, computed once
  sizes.reserve(records.size());
  std::uint64_t pack_size = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    sizes.push_back(records[i].byte_size());
    pack_size += packed[i] ? sizes.back() : 0;
  }
  std::uint64_t pack_offset = 0;
  if (std::find(packed.begin(), packed.end(), true) != packed.end()) {
    pack_offset = create_dataset(index_group.get(), "packed", h5::file_type_for(DType::kU8),
                                 {pack_size}, dcpl, "pack of node " + node)
                      .second;
    if (pack_size > 0) {
      layout.extents.push_back(DataExtent{pack_offset, pack_size});
    }
  }
  auto& offsets = layout.offsets[node];
  offsets.reserve(records.size());
  std::vector<std::uint64_t> in_pack(records.size());  // each packed blob's offset in the pack
  std::uint64_t pack_used = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    const auto bytes = sizes[i];
    std::uint64_t offset = 0;
    if (packed[i]) {
      in_pack[i] = pack_used;
      offset = bytes > 0 ? pack_offset + pack_used : 0;
      pack_used += bytes;
    } else {
      auto [dataset, at] =
          create_dataset(node_group.get(), record.name, h5::file_type_for(record.dtype),
                         record.shape, dcpl, "dataset " + dataset_path(node, record.name));
      h5::mark_dtype(dataset.get(), record.dtype);
      offset = at;
      if (bytes > 0) {
        layout.extents.push_back(DataExtent{offset, bytes});
      }
    }
    offsets.push_back(offset);
  }
  write_blob_index(index_group.get(), "blobs", records.size(), [&](std::size_t i) {
    const auto& record = records[i];
    return IndexRowView{record.name, record.dtype, record.shape, packed[i], in_pack[i], sizes[i]};
  });
  layout.packed[node] = std::move(packed);
  if (!records.empty()) {
    layout.checksum_offsets[node] =
        create_dataset(index_group.get(), "xxh64", Handle(H5Tcopy(H5T_STD_U64LE), "copy type"),
                       {records.size()}, dcpl, "checksum table of node " + node)
            .second;
  }
}

}  // namespace

CheckpointLayout lay_out_checkpoint_file(int fd, CheckpointHeader header,
                                         const std::function<void()>& created) {
  h5::set_up_library();
  CheckpointLayout layout;
  layout.header = std::move(header);  // thousands of records: moved, not copied
  layout.header.format_version = kFormatVersion2;
  // At most one extent per blob and one pack per node.
  std::size_t max_extents = layout.header.node_names.size();
  for (const auto& [node, records] : layout.header.blobs) {
    max_extents += records.size();
  }
  layout.user_block_size = user_block_size_for(max_extents);
  auto file = create_checkpoint_file(fd, layout.user_block_size);
  created();
  write_root_attributes(file.get(), layout.header);
  auto nodes = create_group(file.get(), kNodesGroup);
  auto index = create_group(file.get(), kIndexGroup);
  const auto dcpl = dataset_creation();
  for (const auto& node : layout.header.node_names) {
    lay_out_node(nodes.get(), index.get(), node, dcpl.get(), layout);
  }
  index.close("close group index");
  nodes.close("close group nodes");
  file.close("close file");
  std::sort(layout.extents.begin(), layout.extents.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
  return layout;
}

}  // namespace epochrun
