// Opening the objects of an untrusted HDF5 file safely, and what their storage is. Internal to
// the library: the checkpoint readers (every format version) use these before reading a byte.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

#include "epochrun/blob.hpp"
#include "h5_handle.hpp"

namespace epochrun::h5 {

// Opens a child that must exist and be a hard link (a soft or external link could point
// anywhere) to a dataset (`dataset`) or a group; CorruptCheckpoint naming `what` otherwise.
Handle open_child(hid_t parent, const std::string& name, bool dataset, const std::string& what);
// Whether `parent` has a link `name` (of any kind).
bool has_child(hid_t parent, const std::string& name);

// Refuses (CorruptCheckpoint) every storage but the one epochrun writes: its bytes in the file
// itself, in one contiguous run, unfiltered. External storage would make a read open any file
// the forger named (a FIFO blocks forever, /etc/passwd is read), a virtual dataset reads other
// files too, and filters run decompressors on untrusted bytes. Call it before the dataset's
// shape or type is even asked for (a virtual dataset's shape can depend on its source files).
void check_storage(hid_t dataset, const std::string& what);

// The dataset's shape (a scalar is the empty shape); CorruptCheckpoint when it is not a simple
// or scalar dataspace of at most kMaxDimensions dimensions.
inline constexpr int kMaxDimensions = 32;
Shape shape_of(hid_t dataset, const std::string& what);

// The file offset of a contiguous dataset's bytes; CorruptCheckpoint when it has no storage.
std::uint64_t offset_of(hid_t dataset, const std::string& what);

}  // namespace epochrun::h5
