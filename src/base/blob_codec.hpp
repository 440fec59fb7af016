// Named blobs as one byte buffer, for moving them through MPI (the download gather).
// Internal to the library.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"

namespace epochrun {

// Layout: 8-byte little-endian header length, a JSON header [{name, dtype, shape}...], then
// each blob's raw bytes in header order.
std::vector<std::byte> encode_blobs(const std::map<std::string, Blob>& blobs);
// Throws Error when the buffer is malformed or sizes disagree.
std::map<std::string, Blob> decode_blobs(std::span<const std::byte> buffer);

}  // namespace epochrun
