#include "checkpoint_layout.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "h5_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

using h5::Handle;

constexpr int kMaxDimensions = 32;
// Attribute names; docs/FORMAT.md lists them for readers of the files.
constexpr char kFormatAttr[] = "format";
constexpr char kFormatVersionAttr[] = "format_version";
constexpr char kEpochAttr[] = "epoch";
constexpr char kJobAttr[] = "job";
constexpr char kNumRanksAttr[] = "num_ranks";
constexpr char kNodeNamesAttr[] = "node_names";
constexpr char kConfigAttr[] = "config";
constexpr char kBlobNamesAttr[] = "blob_names";
constexpr char kChecksumAttr[] = "xxh64";

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

std::string dataset_path(const std::string& node, const std::string& blob) {
  return "/" + std::string(kNodesGroup) + "/" + node + "/" + blob;
}

// A name read from a file: a bad one means a damaged or crafted checkpoint, not bad user input.
void validate_stored_name(const std::string& name, std::string_view what) {
  try {
    validate_name(name, what);
  } catch (const UsageError& error) {
    throw CorruptCheckpoint(error.what());
  }
}

// Opens a child that must be a hard link: a soft or external link could point anywhere.
Handle open_child(hid_t parent, const std::string& name, bool dataset, const std::string& what) {
  htri_t exists = H5Lexists(parent, name.c_str(), H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw CorruptCheckpoint(what + " is missing");
  }
  H5L_info_t link{};
  h5::check(H5Lget_info(parent, name.c_str(), &link, H5P_DEFAULT), "inspect " + what);
  if (link.type != H5L_TYPE_HARD) {
    throw CorruptCheckpoint(what + " is a soft or external link");
  }
  H5O_info_t object{};
  h5::check(H5Oget_info_by_name(parent, name.c_str(), &object, H5P_DEFAULT), "inspect " + what);
  if (object.type != (dataset ? H5O_TYPE_DATASET : H5O_TYPE_GROUP)) {
    throw CorruptCheckpoint(what + " is not a " + (dataset ? "dataset" : "group"));
  }
  return dataset ? Handle(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what)
                 : Handle(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what);
}

// The layout lay_out_checkpoint_file writes, and nothing else: its bytes in the file itself, in
// one contiguous run, unfiltered. External storage would make a read open any file the forger
// named (a FIFO blocks forever, /etc/passwd is read), a virtual dataset reads other files too,
// and filters run decompressors on untrusted bytes. Checked before the dataset's shape or type
// is even asked for (a virtual dataset's shape can depend on its source files).
void check_storage(hid_t dataset, const std::string& what) {
  Handle dcpl(H5Dget_create_plist(dataset), "get creation properties of " + what);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) {
    throw CorruptCheckpoint(what +
                            " is not stored contiguously (chunked, compact or virtual layout: "
                            "epochrun never writes those)");
  }
  if (H5Pget_external_count(dcpl.get()) != 0) {
    throw CorruptCheckpoint(what + " keeps its data in external files");
  }
  if (H5Pget_nfilters(dcpl.get()) != 0) {
    throw CorruptCheckpoint(what + " has filters (epochrun never writes those)");
  }
}

// One blob's record and the offset of its bytes.
std::pair<BlobRecord, std::uint64_t> read_record(hid_t node_group, const std::string& node,
                                                 const std::string& name,
                                                 std::uint64_t file_bytes) {
  validate_stored_name(name, "blob name");
  const std::string what = "dataset " + dataset_path(node, name);
  auto dataset = open_child(node_group, name, true, what);
  check_storage(dataset.get(), what);
  BlobRecord record;
  record.name = name;
  Handle type(H5Dget_type(dataset.get()), "get type of " + what);
  record.dtype = h5::dtype_of(type.get(), what);
  Handle space(H5Dget_space(dataset.get()), "get space of " + what);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > kMaxDimensions || H5Sget_simple_extent_type(space.get()) == H5S_NULL) {
    throw CorruptCheckpoint(what + " has an unsupported shape");
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  record.shape.assign(dims.begin(), dims.end());
  try {
    // Contiguous data must fit in the file: nothing a crafted header says makes us allocate more.
    if (record.byte_size() > file_bytes) {
      throw CorruptCheckpoint(what + " claims " + std::to_string(record.byte_size()) +
                              " bytes, more than the whole file");
    }
  } catch (const UsageError&) {
    throw CorruptCheckpoint(what + " has a shape that overflows 64 bits");
  }
  record.xxh64 = h5::read_uint_attribute(dataset.get(), kChecksumAttr);
  std::uint64_t offset = 0;
  if (record.byte_size() > 0) {
    const haddr_t address = H5Dget_offset(dataset.get());
    if (address == HADDR_UNDEF) {
      H5Eclear2(H5E_DEFAULT);
      throw CorruptCheckpoint(what + " has no storage in the file");
    }
    offset = address;
  }
  return {std::move(record), offset};
}

CheckpointLayout read_layout(hid_t file, std::uint64_t file_bytes) {
  CheckpointLayout layout;
  auto& header = layout.header;
  header.format = h5::read_string_attribute(file, kFormatAttr, file_bytes);
  if (header.format != kCheckpointFormatName) {
    throw CorruptCheckpoint("not an epochrun checkpoint (format '" + header.format + "')");
  }
  header.format_version = h5::read_int_attribute(file, kFormatVersionAttr);
  if (header.format_version != kCheckpointFormatVersion) {
    throw CheckpointMismatch("format version " + std::to_string(header.format_version) +
                             " is not the version this epochrun reads (" +
                             std::to_string(kCheckpointFormatVersion) + ")");
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
  auto nodes = open_child(file, kNodesGroup, false, std::string("group /") + kNodesGroup);
  for (const auto& node : header.node_names) {
    auto group = open_child(nodes.get(), node, false, "group of node " + node);
    auto& records = header.blobs[node];
    auto& offsets = layout.offsets[node];
    for (const auto& name :
         h5::read_string_list_attribute(group.get(), kBlobNamesAttr, file_bytes)) {
      auto [record, offset] = read_record(group.get(), node, name, file_bytes);
      records.push_back(std::move(record));
      offsets.push_back(offset);
    }
  }
  return layout;
}

// Every blob's bytes must be exactly one of the extents the integrity header recorded at commit
// (and every extent one blob's): no blob reads metadata, another blob's bytes or past the end.
void check_extents(const CheckpointLayout& layout, const IntegrityHeader& integrity) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> claimed;
  for (const auto& [node, records] : layout.header.blobs) {
    const auto& offsets = layout.offsets.at(node);
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (records[i].byte_size() > 0) {
        claimed.emplace_back(offsets[i], records[i].byte_size());
      }
    }
  }
  std::sort(claimed.begin(), claimed.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> committed;
  for (const auto& extent : integrity.extents) {
    committed.emplace_back(extent.offset, extent.length);
  }
  if (claimed != committed) {
    throw CorruptCheckpoint(
        "its datasets' storage does not match the data extents recorded at commit");
  }
}

void write_root_attributes(hid_t file, const CheckpointHeader& header) {
  h5::write_string_attribute(file, kFormatAttr, header.format);
  h5::write_int_attribute(file, kFormatVersionAttr, header.format_version);
  h5::write_int_attribute(file, kEpochAttr, header.epoch);
  h5::write_string_attribute(file, kJobAttr, header.job);
  h5::write_int_attribute(file, kNumRanksAttr, header.num_ranks());
  h5::write_string_list_attribute(file, kNodeNamesAttr, header.node_names);
  h5::write_string_attribute(file, kConfigAttr, header.config_json);
}

}  // namespace

CheckpointLayout lay_out_checkpoint_file(int fd, const CheckpointHeader& header,
                                         std::uint64_t user_block_size) {
  h5::silence_error_printing();
  CheckpointLayout layout;
  layout.header = header;
  auto fapl = file_access();
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), "create file creation list");
  h5::check(H5Pset_userblock(fcpl.get(), user_block_size), "reserve the user block");
  Handle file(H5Fcreate(descriptor_path(fd).c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
              "create file");
  write_root_attributes(file.get(), header);
  Handle nodes(H5Gcreate2(file.get(), kNodesGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               "create group nodes");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), "create dataset list");
  // Allocated now, so that each dataset's offset is known before any byte is written; never
  // filled (that would write every byte twice).
  h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "allocate at creation");
  h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "disable fill values");
  for (const auto& node : header.node_names) {
    const auto& records = header.blobs.at(node);
    Handle group(H5Gcreate2(nodes.get(), node.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 "create group of node " + node);
    std::vector<std::string> names;
    for (const auto& record : records) {
      names.push_back(record.name);
    }
    h5::write_string_list_attribute(group.get(), kBlobNamesAttr, names);
    auto& offsets = layout.offsets[node];
    for (const auto& record : records) {
      const auto what = dataset_path(node, record.name);
      auto type = h5::file_type_for(record.dtype);
      auto space = h5::dataspace_for(record.shape);
      Handle dataset(H5Dcreate2(group.get(), record.name.c_str(), type.get(), space.get(),
                                H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                     "create dataset " + what);
      h5::write_uint_attribute(dataset.get(), kChecksumAttr, record.xxh64);
      std::uint64_t offset = 0;
      if (record.byte_size() > 0) {
        // Contiguous and allocated at creation: the offset is final (and counts the user block).
        const haddr_t address = H5Dget_offset(dataset.get());
        if (address == HADDR_UNDEF) {
          throw Hdf5Error("no file offset for " + what);
        }
        offset = address;
      }
      offsets.push_back(offset);
    }
  }
  nodes.close("close group nodes");
  file.close("close file");
  return layout;
}

CheckpointLayout read_checkpoint_layout(int fd, const IntegrityHeader& integrity) {
  h5::silence_error_printing();
  try {
    auto fapl = file_access();
    Handle file(H5Fopen(descriptor_path(fd).c_str(), H5F_ACC_RDONLY, fapl.get()), "open");
    auto layout = read_layout(file.get(), integrity.file_size);
    check_extents(layout, integrity);
    file.close("close");
    return layout;
  } catch (const Hdf5Error& error) {
    throw CorruptCheckpoint("not a readable HDF5 file (" + std::string(error.what()) + ")");
  }
}

}  // namespace epochrun
