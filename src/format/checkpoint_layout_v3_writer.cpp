// Laying out a new version 3 checkpoint file: one dataset per blob name, whatever the rank
// count, allocated and never filled (docs/FORMAT.md, "Format version 3").
#include <algorithm>
#include <cstring>

#include "checkpoint_layout.hpp"
#include "checkpoint_layout_internal.hpp"
#include "checkpoint_layout_v3.hpp"
#include "checkpoint_root_attributes.hpp"
#include "h5_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_library.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"
#include "stored_file_codec.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// Group names of version 3; docs/FORMAT.md shows them.
constexpr char kNodes[] = "nodes";
constexpr char kReplicated[] = "replicated";
constexpr char kArrays[] = "arrays";
constexpr char kIndex[] = "index";

// Which per-node blobs (description order) share the pack: those under kPackBelowBytes, when
// there are at least kPackFromCount of them (the rule of version 2, per name instead of per
// node).
std::vector<bool> packed_blobs(const std::vector<BlobDescription>& blobs) {
  std::vector<bool> packed;
  std::size_t small = 0;
  for (const auto& blob : blobs) {
    packed.push_back(blob.kind == StorageKind::kPerNode && blob.value_bytes() < kPackBelowBytes);
    small += packed.back() ? 1 : 0;
  }
  if (small < kPackFromCount) {
    packed.assign(blobs.size(), false);
  }
  return packed;
}

// The writer blocks of a global array as two attributes, each writer's start and count.
void record_blocks(hid_t dataset, const BlobDescription& blob) {
  const std::uint64_t dimensions = blob.shape.size();
  std::vector<std::uint64_t> starts;
  std::vector<std::uint64_t> counts;
  for (const auto& block : blob.writer_blocks) {
    starts.insert(starts.end(), block.start.begin(), block.start.end());
    counts.insert(counts.end(), block.count.begin(), block.count.end());
  }
  h5::write_uint_table_attribute(dataset, "epochrun_block_starts", blob.writer_blocks.size(),
                                 dimensions, starts);
  h5::write_uint_table_attribute(dataset, "epochrun_block_counts", blob.writer_blocks.size(),
                                 dimensions, counts);
}

}  // namespace

Handle ragged_row_file_type(std::size_t width) {
  const hsize_t dimensions = width;
  Handle shape(H5Tarray_create2(H5T_STD_U64LE, 1, &dimensions), "create shape type");
  Handle type(H5Tcreate(H5T_COMPOUND, 1 + 8 * width + 16), "create ragged row type");
  h5::check(H5Tinsert(type.get(), "ndim", 0, H5T_STD_U8LE), "build ragged row type");
  h5::check(H5Tinsert(type.get(), "shape", 1, shape.get()), "build ragged row type");
  h5::check(H5Tinsert(type.get(), "offset", 1 + 8 * width, H5T_STD_U64LE), "build ragged row type");
  h5::check(H5Tinsert(type.get(), "size", 1 + 8 * width + 8, H5T_STD_U64LE),
            "build ragged row type");
  return type;
}

namespace {

// The groups of the file and the creation list its datasets share.
struct Groups {
  Handle nodes;
  Handle replicated;
  Handle arrays;
  Handle index;
  Handle dcpl = dataset_creation();
};

// Creates the dataset of one blob (none for a packed one) and returns its offset.
std::uint64_t lay_out_blob(const BlobDescription& blob, std::uint64_t ranks, const Groups& groups,
                           LayoutV3& layout) {
  Shape shape = blob.shape;
  hid_t parent = groups.nodes.get();
  std::string path = std::string("/") + kNodes + "/" + blob.name;
  switch (blob.kind) {
    case StorageKind::kPerNode:
      shape.insert(shape.begin(), ranks);
      break;
    case StorageKind::kRagged:
      shape = {blob.ragged_elements};
      break;
    case StorageKind::kReplicated:
      parent = groups.replicated.get();
      path = std::string("/") + kReplicated + "/" + blob.name;
      break;
    case StorageKind::kGlobalArray:
      parent = groups.arrays.get();
      path = std::string("/") + kArrays + "/" + blob.name;
      break;
  }
  auto [dataset, offset] = create_dataset(parent, blob.name, h5::file_type_for(blob.dtype), shape,
                                          groups.dcpl.get(), "dataset " + path);
  h5::mark_dtype(dataset.get(), blob.dtype);
  if (blob.kind == StorageKind::kGlobalArray) {
    record_blocks(dataset.get(), blob);
  }
  const std::uint64_t bytes = element_count(shape) * element_size(blob.dtype);
  if (bytes > 0) {
    layout.extents.push_back(DataExtent{offset, bytes});
  }
  return offset;
}

// The pack, the blob index, the checksum table and the ragged index under /index.
void lay_out_index(const FileDescription& description, const Groups& groups, LayoutV3& layout) {
  const std::uint64_t ranks = description.ranks();
  const auto& blobs = description.blobs;
  if (layout.pack_row_bytes > 0) {
    layout.pack_offset =
        create_dataset(groups.index.get(), "packed", h5::file_type_for(DType::kU8),
                       {ranks, layout.pack_row_bytes}, groups.dcpl.get(), "the pack")
            .second;
    layout.extents.push_back(DataExtent{layout.pack_offset, ranks * layout.pack_row_bytes});
  }
  write_blob_index(
      groups.index.get(), "blobs", blobs.size(),
      [&](std::size_t i) {
        const auto& blob = blobs[i];
        return IndexRowView{blob.name,         blob.dtype,         blob.shape, layout.packed[i],
                            layout.in_pack[i], blob.value_bytes(), blob.kind};
      },
      IndexColumns::kWithKind);
  std::uint64_t checksums = ranks * layout.per_node_blobs;
  std::uint64_t ragged = 0;
  for (const auto& blob : blobs) {
    checksums += blob.kind == StorageKind::kReplicated    ? 1
                 : blob.kind == StorageKind::kGlobalArray ? blob.writer_blocks.size()
                                                          : 0;
    ragged += blob.kind == StorageKind::kRagged ? 1 : 0;
  }
  // The tables the ranks fill in as they write are data extents, like the values: the file is
  // sealed (its metadata hashed) as soon as it is laid out, before any rank writes.
  if (checksums > 0) {
    layout.checksums_offset =
        create_dataset(groups.index.get(), "xxh64", Handle(H5Tcopy(H5T_STD_U64LE), "copy type"),
                       {checksums}, groups.dcpl.get(), "the checksum table")
            .second;
    layout.extents.push_back(DataExtent{layout.checksums_offset, 8 * checksums});
  }
  if (ragged > 0) {
    layout.ragged_row_bytes = 1 + 8 * description.ragged_dimensions + 16;
    layout.ragged_index_offset =
        create_dataset(groups.index.get(), "ragged",
                       ragged_row_file_type(description.ragged_dimensions), {ragged * ranks},
                       groups.dcpl.get(), "the ragged index")
            .second;
    layout.extents.push_back(
        DataExtent{layout.ragged_index_offset, layout.ragged_row_bytes * ragged * ranks});
  }
}

}  // namespace

std::uint64_t BlobDescription::value_bytes() const {
  const std::uint64_t elements =
      kind == StorageKind::kRagged ? ragged_elements : element_count(shape);
  return elements * element_size(dtype);
}

std::vector<std::byte> ragged_index_row(const Shape& shape, std::size_t width, std::uint64_t offset,
                                        std::uint64_t size) {
  std::vector<std::byte> row(1 + 8 * width + 16);
  row[0] = static_cast<std::byte>(shape.size());
  // Little-endian on every machine epochrun builds for (blob_index.cpp asserts it).
  std::memcpy(row.data() + 1, shape.data(), 8 * std::min(shape.size(), width));
  std::memcpy(row.data() + 1 + 8 * width, &offset, 8);
  std::memcpy(row.data() + 1 + 8 * width + 8, &size, 8);
  return row;
}

LayoutV3 lay_out_checkpoint_file_v3(int fd, const FileDescription& description,
                                    const std::function<void()>& created) {
  h5::set_up_library();
  const auto& blobs = description.blobs;
  LayoutV3 layout;
  layout.packed = packed_blobs(blobs);
  layout.in_pack.assign(blobs.size(), 0);
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (layout.packed[i]) {
      layout.in_pack[i] = layout.pack_row_bytes;
      layout.pack_row_bytes += blobs[i].value_bytes();
    }
    layout.per_node_blobs +=
        blobs[i].kind == StorageKind::kPerNode || blobs[i].kind == StorageKind::kRagged ? 1 : 0;
  }
  // At most one extent per blob, the pack and the two tables; and room for the layout record
  // (stored_file_codec.hpp), which a load reads instead of opening the file with HDF5, unless it
  // would make the user block larger than a reader accepts.
  const auto extents = blobs.size() + 3;
  const auto with_record = user_block_size_for(extents, layout_record_bytes_at_most(description));
  layout.user_block_size =
      with_record <= kMaxUserBlockSize ? with_record : user_block_size_for(extents);
  auto file = create_checkpoint_file(fd, layout.user_block_size);
  created();
  CheckpointHeader root;
  root.format_version = kFormatVersion3;
  root.epoch = description.epoch;
  root.job = description.job;
  root.node_names = description.node_names;
  root.config_json = description.config_json;
  write_root_attributes(file.get(), root);
  layout.offsets.assign(blobs.size(), 0);
  {
    const Groups groups{create_group(file.get(), kNodes), create_group(file.get(), kReplicated),
                        create_group(file.get(), kArrays), create_group(file.get(), kIndex)};
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      if (!layout.packed[i]) {
        layout.offsets[i] = lay_out_blob(blobs[i], description.ranks(), groups, layout);
      }
    }
    lay_out_index(description, groups, layout);
  }
  file.close("close file");
  std::sort(layout.extents.begin(), layout.extents.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
  return layout;
}

}  // namespace epochrun
