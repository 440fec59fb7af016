// What the writer and the readers of the checkpoint layout share: how HDF5 opens the file,
// where a blob's dataset is, and which blobs are packed.
#include "checkpoint_layout.hpp"

#include <algorithm>

#include "epochrun/errors.hpp"

#include "checkpoint_groups.hpp"
#include "checkpoint_layout_internal.hpp"
#include "h5_creation.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"

namespace epochrun {

h5::Handle create_group(hid_t parent, const std::string& name) {
  const auto gcpl = h5::untimed_creation_list(H5P_GROUP_CREATE, "group creation list");
  return h5::Handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                    "create group " + name);
}

// The creation properties of every dataset: contiguous, allocated at creation (so that its
// offset is known before any byte is written) and never filled (that would write every byte
// twice).
h5::Handle dataset_creation() {
  auto list = h5::untimed_creation_list(H5P_DATASET_CREATE, "dataset creation list");
  h5::check(H5Pset_alloc_time(list.get(), H5D_ALLOC_TIME_EARLY), "allocate at creation");
  h5::check(H5Pset_fill_time(list.get(), H5D_FILL_TIME_NEVER), "disable fill values");
  return list;
}

// Creates a dataset with `dcpl` and returns it and the offset of its bytes (0 when it holds
// none).
std::pair<h5::Handle, std::uint64_t> create_dataset(hid_t parent, const std::string& name,
                                                    const h5::Handle& type, const Shape& shape,
                                                    hid_t dcpl, const std::string& what) {
  auto space = h5::dataspace_for(shape);
  h5::Handle dataset(
      H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "create " + what);
  std::uint64_t offset = 0;
  if (element_count(shape) > 0) {
    // Contiguous and allocated at creation: the offset is final (and counts the user block).
    offset = h5::offset_of(dataset.get(), what);
  }
  return {std::move(dataset), offset};
}

// Serial (sec2) access. HDF5 opens the file by name: the caller passes descriptor_path() of the
// descriptor it checked, so this is the very file it created or verified.
h5::Handle checkpoint_file_access() {
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  // The 1.8 format: dense attribute storage (node lists of large jobs exceed the 64 KiB of
  // compact attributes), still readable by every HDF5 and h5py of the last decade.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "set format bounds");
  // Commits are made atomic by rename, not by locks; HDF5's flock also fails on some
  // parallel file systems (HDF5_USE_FILE_LOCKING=FALSE is the usual workaround).
  h5::check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  return fapl;
}

h5::Handle create_checkpoint_file(int fd, std::uint64_t user_block_size) {
  auto fapl = checkpoint_file_access();
  // Large datasets start on a page (relative to the user block, itself whole pages), so that
  // a background write can send them with direct I/O.
  h5::check(H5Pset_alignment(fapl.get(), kAlignDatasetsFrom, kDirectIoAlignment),
            "set the alignment");
  const auto fcpl = h5::untimed_creation_list(H5P_FILE_CREATE, "file creation list");
  h5::check(H5Pset_userblock(fcpl.get(), user_block_size), "reserve the user block");
  step_times::count_call("H5Fcreate");
  return h5::Handle(H5Fcreate(descriptor_path(fd).c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
                    "create file");
}

bool same_extents(const std::vector<DataExtent>& a, const std::vector<DataExtent>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const DataExtent& x, const DataExtent& y) {
                      return x.offset == y.offset && x.length == y.length;
                    });
}

void check_extents_match(const std::vector<DataExtent>& found,
                         const std::vector<DataExtent>& committed) {
  if (!same_extents(found, committed)) {
    throw CorruptCheckpoint(
        "its datasets' storage does not match the data extents recorded at commit");
  }
}

std::string dataset_path(const std::string& node, const std::string& blob) {
  return "/" + std::string(kNodesGroup) + "/" + node + "/" + blob;
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

}  // namespace epochrun
