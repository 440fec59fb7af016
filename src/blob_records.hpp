// Blob records as text, to travel between ranks (a gather of every rank's description, a
// broadcast of every rank's records and offsets on load). Internal to the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// Where a record's bytes are in a file: their offset, and whether they are in the node's pack.
struct BlobPlace {
  std::uint64_t offset = 0;
  bool packed = false;
};

// `records` (and, when given, the place of each) as a JSON array.
std::string records_to_json(const std::vector<BlobRecord>& records,
                            const std::vector<BlobPlace>& places = {});
// The inverse; fills `places` when given. Throws on malformed text (it comes from a peer rank,
// never from a file).
std::vector<BlobRecord> records_from_json(const std::string& text,
                                          std::vector<BlobPlace>* places = nullptr);

}  // namespace epochrun
