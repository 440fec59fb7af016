#include "checkpoint_layout.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "blob_index.hpp"
#include "checkpoint_groups.hpp"
#include "checkpoint_layout_readers.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "h5_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// Attribute names; docs/FORMAT.md lists them for readers of the files.
constexpr char kFormatAttr[] = "format";
constexpr char kFormatVersionAttr[] = "format_version";
constexpr char kEpochAttr[] = "epoch";
constexpr char kJobAttr[] = "job";
constexpr char kNumRanksAttr[] = "num_ranks";
constexpr char kNodeNamesAttr[] = "node_names";
constexpr char kConfigAttr[] = "config";
// The oldest format version this epochrun still reads.
constexpr std::int64_t kOldestReadableVersion = 1;

// Serial (sec2) access. HDF5 opens the file by name: the caller passes descriptor_path() of the
// descriptor it checked, so this is the very file it created or verified.
Handle file_access() {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  // The 1.8 format: dense attribute storage (node lists of large jobs exceed the 64 KiB of
  // compact attributes), still readable by every HDF5 and h5py of the last decade.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "set format bounds");
  // Commits are made atomic by rename, not by locks; HDF5's flock also fails on some
  // parallel file systems (HDF5_USE_FILE_LOCKING=FALSE is the usual workaround).
  h5::check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  return fapl;
}

void read_root_attributes(hid_t file, CheckpointHeader& header, std::uint64_t file_bytes) {
  header.format = h5::read_string_attribute(file, kFormatAttr, file_bytes);
  if (header.format != kCheckpointFormatName) {
    throw CorruptCheckpoint("not an epochrun checkpoint (format '" + header.format + "')");
  }
  header.format_version = h5::read_int_attribute(file, kFormatVersionAttr);
  if (header.format_version < kOldestReadableVersion ||
      header.format_version > kCheckpointFormatVersion) {
    throw CheckpointMismatch("format version " + std::to_string(header.format_version) +
                             " is not one this epochrun reads (" +
                             std::to_string(kOldestReadableVersion) + " to " +
                             std::to_string(kCheckpointFormatVersion) + "): " +
                             (header.format_version > kCheckpointFormatVersion
                                  ? "it was written by a newer epochrun; load it with that version"
                                  : "it is not a version epochrun ever wrote"));
  }
  header.epoch = h5::read_int_attribute(file, kEpochAttr);
  header.job = h5::read_string_attribute(file, kJobAttr, file_bytes);
  validate_stored_name(header.job, "job name");
  header.node_names = h5::read_string_list_attribute(file, kNodeNamesAttr, file_bytes);
  auto num_ranks = h5::read_int_attribute(file, kNumRanksAttr);
  if (num_ranks < 1 || num_ranks != header.num_ranks()) {
    throw CorruptCheckpoint("num_ranks " + std::to_string(num_ranks) + " does not match its " +
                            std::to_string(header.node_names.size()) + " node names");
  }
  header.config_json = h5::read_string_attribute(file, kConfigAttr, file_bytes);
  // The whole node list is checked before any group is opened.
  std::set<std::string> seen;
  for (const auto& node : header.node_names) {
    validate_stored_name(node, "node name");
    if (!seen.insert(node).second) {
      throw CorruptCheckpoint("node '" + node + "' is listed twice");
    }
  }
}

void write_root_attributes(hid_t file, const CheckpointHeader& header) {
  h5::write_string_attribute(file, kFormatAttr, header.format);
  h5::write_int_attribute(file, kFormatVersionAttr, kCheckpointFormatVersion);
  h5::write_int_attribute(file, kEpochAttr, header.epoch);
  h5::write_string_attribute(file, kJobAttr, header.job);
  h5::write_int_attribute(file, kNumRanksAttr, header.num_ranks());
  h5::write_string_list_attribute(file, kNodeNamesAttr, header.node_names);
  h5::write_string_attribute(file, kConfigAttr, header.config_json);
}

Handle create_group(hid_t parent, const std::string& name) {
  return Handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                "create group " + name);
}

// The creation properties of every dataset: contiguous, allocated at creation (so that its
// offset is known before any byte is written) and never filled (that would write every byte
// twice).
Handle dataset_creation() {
  Handle list(H5Pcreate(H5P_DATASET_CREATE), "create dataset list");
  h5::check(H5Pset_alloc_time(list.get(), H5D_ALLOC_TIME_EARLY), "allocate at creation");
  h5::check(H5Pset_fill_time(list.get(), H5D_FILL_TIME_NEVER), "disable fill values");
  return list;
}

// Creates a dataset with `dcpl` and returns it and the offset of its bytes (0 when it holds
// none).
std::pair<Handle, std::uint64_t> create_dataset(hid_t parent, const std::string& name,
                                                const Handle& type, const Shape& shape, hid_t dcpl,
                                                const std::string& what) {
  auto space = h5::dataspace_for(shape);
  Handle dataset(
      H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "create " + what);
  std::uint64_t offset = 0;
  if (element_count(shape) > 0) {
    // Contiguous and allocated at creation: the offset is final (and counts the user block).
    offset = h5::offset_of(dataset.get(), what);
  }
  return {std::move(dataset), offset};
}

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

std::string dataset_path(const std::string& node, const std::string& blob) {
  return "/" + std::string(kNodesGroup) + "/" + node + "/" + blob;
}

void validate_stored_name(const std::string& name, std::string_view what) {
  try {
    validate_name(name, what);
  } catch (const UsageError& error) {
    throw CorruptCheckpoint(error.what());
  }
}

std::uint64_t checked_byte_size(const BlobRecord& record, std::uint64_t file_bytes,
                                const std::function<std::string()>& what) {
  try {
    // Stored data must fit in the file: nothing a crafted header says makes us allocate more.
    if (record.byte_size() > file_bytes) {
      throw CorruptCheckpoint(what() + " claims " + std::to_string(record.byte_size()) +
                              " bytes, more than the whole file");
    }
  } catch (const UsageError&) {
    throw CorruptCheckpoint(what() + " has a shape that overflows 64 bits");
  }
  return record.byte_size();
}

std::vector<bool> packed_blobs(const std::vector<BlobRecord>& records) {
  std::vector<bool> packed;
  packed.reserve(records.size());
  std::size_t small = 0;
  for (const auto& record : records) {
    packed.push_back(record.byte_size() < kPackBelowBytes);
    small += packed.back() ? 1 : 0;
  }
  if (small < kPackFromCount) {
    packed.assign(records.size(), false);
  }
  return packed;
}

CheckpointLayout lay_out_checkpoint_file(int fd, CheckpointHeader header,
                                         const std::function<void()>& created) {
  h5::silence_error_printing();
  CheckpointLayout layout;
  layout.header = std::move(header);  // thousands of records: moved, not copied
  layout.header.format_version = kCheckpointFormatVersion;
  // At most one extent per blob and one pack per node.
  std::size_t max_extents = layout.header.node_names.size();
  for (const auto& [node, records] : layout.header.blobs) {
    max_extents += records.size();
  }
  layout.user_block_size = user_block_size_for(max_extents);
  auto fapl = file_access();
  // Large datasets start on a page (relative to the user block, itself whole pages), so that
  // a background write can send them with direct I/O.
  h5::check(H5Pset_alignment(fapl.get(), kAlignDatasetsFrom, kDirectIoAlignment),
            "set the alignment");
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), "create file creation list");
  h5::check(H5Pset_userblock(fcpl.get(), layout.user_block_size), "reserve the user block");
  Handle file(H5Fcreate(descriptor_path(fd).c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
              "create file");
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

CheckpointLayout read_checkpoint_layout(int fd, const IntegrityHeader& integrity) {
  h5::silence_error_printing();
  try {
    auto fapl = file_access();
    Handle file(H5Fopen(descriptor_path(fd).c_str(), H5F_ACC_RDONLY, fapl.get()), "open");
    CheckpointLayout layout;
    layout.user_block_size = integrity.user_block_size;
    read_root_attributes(file.get(), layout.header, integrity.file_size);
    if (layout.header.format_version == 1) {
      read_nodes_v1(file.get(), layout, integrity.file_size);
    } else {
      read_nodes_v2(file.get(), layout, integrity.file_size);
    }
    // Every blob's bytes (every pack's) must be exactly one of the extents the integrity
    // header recorded at commit, and every extent one of them: no blob reads metadata, another
    // blob's bytes or past the end.
    const auto same = [](const DataExtent& a, const DataExtent& b) {
      return a.offset == b.offset && a.length == b.length;
    };
    if (!std::equal(layout.extents.begin(), layout.extents.end(), integrity.extents.begin(),
                    integrity.extents.end(), same)) {
      throw CorruptCheckpoint(
          "its datasets' storage does not match the data extents recorded at commit");
    }
    file.close("close");
    return layout;
  } catch (const Hdf5Error& error) {
    throw CorruptCheckpoint("not a readable HDF5 file (" + std::string(error.what()) + ")");
  }
}

}  // namespace epochrun
