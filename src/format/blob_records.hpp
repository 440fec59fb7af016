// Blob records in a compact binary form, to travel between ranks (a gather of every rank's
// description on save, every rank's records and places on load): thousands of small blobs
// must not cost a text round trip. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// Where a record's bytes are in a file: their offset, and whether they are in the node's pack.
struct BlobPlace {
  std::uint64_t offset = 0;
  bool packed = false;
};

// `records` (and, when given, the place of each) as bytes; their names and shapes must be valid
// ones (validate_name, at most h5::kMaxDimensions dimensions).
std::vector<std::byte> encode_records(const std::vector<BlobRecord>& records,
                                      const std::vector<BlobPlace>& places = {});
// The inverse; fills `places` when given. Throws Error on a truncated or malformed buffer (it
// comes from a peer rank, never from a file).
std::vector<BlobRecord> decode_records(std::span<const std::byte> bytes,
                                       std::vector<BlobPlace>* places = nullptr);

}  // namespace epochrun
