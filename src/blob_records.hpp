// Blob records as text, to travel between ranks (a gather of every rank's description, a
// broadcast of every rank's records and offsets on load). Internal to the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// `records` (and, when given, one file offset per record) as a JSON array.
std::string records_to_json(const std::vector<BlobRecord>& records,
                            const std::vector<std::uint64_t>& offsets = {});
// The inverse; fills `offsets` when given. Throws on malformed text (it comes from a peer rank,
// never from a file).
std::vector<BlobRecord> records_from_json(const std::string& text,
                                          std::vector<std::uint64_t>* offsets = nullptr);

}  // namespace epochrun
