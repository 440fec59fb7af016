// What the writer and the readers of the checkpoint layout share: how HDF5 opens the file,
// where a blob's dataset is, and which blobs are packed.
#include "checkpoint_layout.hpp"

#include "checkpoint_groups.hpp"
#include "checkpoint_layout_internal.hpp"

namespace epochrun {

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
