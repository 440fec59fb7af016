// A version 3 file's layout, as a reader found and verified it, in bytes: rank 0 reads the file's
// metadata once (serial HDF5, its hash checked) and broadcasts this, so that every other rank's
// share of a load is its own values alone -- no HDF5 open, no O(ranks) metadata read per rank,
// which at thousands of ranks would make the file system serve the whole metadata once per rank.
// Internal to the library.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint_layout_v3.hpp"

namespace epochrun {

std::vector<std::byte> encode_stored_file(const StoredFileV3& stored);
// MpiError when `bytes` are not what encode_stored_file makes (they come from another rank).
StoredFileV3 decode_stored_file(std::span<const std::byte> bytes);

}  // namespace epochrun
