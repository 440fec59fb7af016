// numpy's .npy files (format version 1.0), which `numpy.load` reads without pickling.
#pragma once

#include <filesystem>
#include <string>

#include "epochrun/blob.hpp"

namespace epochrun::cli {

// The .npy header of an array of this dtype and shape: magic, version 1.0, the header length
// and the dict numpy reads ('descr' little-endian, C order, the shape), padded with spaces so
// that the data starts at a multiple of 64 bytes. Opaque bytes are uint8 ('|u1').
std::string npy_header(DType dtype, const Shape& shape);

// Writes `blob` to `file`, which must not exist (never through a symlink), mode 0644. Throws
// Error naming the file.
void write_npy(const std::filesystem::path& file, const Blob& blob);

}  // namespace epochrun::cli
