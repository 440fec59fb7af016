// How each DType is stored in HDF5, and back. Internal to the library.
#pragma once

#include <hdf5.h>

#include <string>

#include "epochrun/blob.hpp"
#include "h5_handle.hpp"

namespace epochrun::h5 {

// `bytes` blobs are stored as uint8 marked by this string attribute (value kBytesMark), so
// that every HDF5 reader reads them (h5py cannot convert a tagged opaque type, which version 1
// checkpoints used).
inline constexpr char kDTypeAttr[] = "epochrun_dtype";
inline constexpr char kBytesMark[] = "bytes";

// The type stored in the file: fixed little-endian, so files move between machines. `bytes` is
// H5T_STD_U8LE: write mark_dtype on its dataset.
Handle file_type_for(DType dtype);
// The type of the bytes in memory (native order; HDF5 converts when they differ).
Handle memory_type_for(DType dtype);
// Writes the kDTypeAttr attribute on a dataset of a `bytes` blob; nothing for other dtypes.
void mark_dtype(hid_t dataset, DType dtype);
// The DType of a dataset: its stored type, and uint8 marked as above is `bytes` (so is the
// opaque type of size 1 of older files); CorruptCheckpoint naming `what` for anything else.
DType dtype_of(hid_t dataset, const std::string& what);
// A scalar dataspace for an empty shape, a simple one otherwise.
Handle dataspace_for(const Shape& shape);

}  // namespace epochrun::h5
