// How each DType is stored in HDF5, and back. Internal to the library.
#pragma once

#include <hdf5.h>

#include <string>

#include "epochrun/blob.hpp"
#include "h5_handle.hpp"

namespace epochrun::h5 {

// Opaque blobs carry this tag so readers can tell them from other opaque data.
inline constexpr char kBytesTag[] = "epochrun:bytes";

// The type stored in the file: fixed little-endian, so files move between machines.
Handle file_type_for(DType dtype);
// The type of the bytes in memory (native order; HDF5 converts when they differ).
Handle memory_type_for(DType dtype);
// The DType a stored type maps to; CorruptCheckpoint naming `what` for anything else.
DType dtype_of(hid_t type, const std::string& what);
// A scalar dataspace for an empty shape, a simple one otherwise.
Handle dataspace_for(const Shape& shape);

}  // namespace epochrun::h5
