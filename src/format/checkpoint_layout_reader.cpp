// Reading an existing checkpoint file's layout, of any readable format version: the root
// attributes, then the version's node reader, then the data extents against the integrity
// header's; and the checks every version's reader shares.
#include <algorithm>

#include "checkpoint_layout.hpp"
#include "checkpoint_layout_internal.hpp"
#include "checkpoint_layout_readers.hpp"
#include "checkpoint_root_attributes.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "error_table.hpp"
#include "h5_handle.hpp"
#include "h5_library.hpp"
#include "regular_file.hpp"

namespace epochrun {

void validate_stored_name(const std::string& name, std::string_view what) {
  read_or_corrupt([&] { validate_name(name, what); });
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

CheckpointLayout read_checkpoint_layout(int fd, const IntegrityHeader& integrity) {
  h5::set_up_library();
  try {
    auto fapl = checkpoint_file_access();
    h5::Handle file(h5::open_file_read_only(descriptor_path(fd), fapl.get(), "open"));
    CheckpointLayout layout;
    layout.user_block_size = integrity.user_block_size;
    read_root_attributes(file.get(), layout.header, integrity.file_size, kFormatVersion2);
    if (layout.header.format_version == 1) {
      read_nodes_v1(file.get(), layout, integrity.file_size);
    } else {
      read_nodes_v2(file.get(), layout, integrity.file_size);
    }
    // Every blob's bytes (every pack's) must be exactly one of the extents the integrity
    // header recorded at commit, and every extent one of them: no blob reads metadata, another
    // blob's bytes or past the end.
    check_extents_match(layout.extents, integrity.extents);
    file.close("close");
    return layout;
  } catch (const Hdf5Error& error) {
    throw CorruptCheckpoint("not a readable HDF5 file (" + std::string(error.what()) + ")");
  }
}

}  // namespace epochrun
