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

// The layout record (docs/FORMAT.md, "The layout record"): a version 3 file's description and
// layout, kept by its writer in the user block after the integrity header, so that a load's
// rank 0 finds the layout with one read instead of an HDF5 open. Everything a load needs of the
// metadata but the two tables the ranks fill in as they write (the checksums and the ragged
// index), which the record says where to read.
//
// The record of `layout`, or nothing when it does not fit the user block that layout has.
std::vector<std::byte> layout_record_for(const FileDescription& description,
                                         const LayoutV3& layout);
// The most bytes the record of a file laid out from `description` can take, whatever its
// offsets: the lay-out sizes the user block with it before HDF5 places anything.
std::size_t layout_record_bytes_at_most(const FileDescription& description);
// The description and layout a record holds (no checksums, no ragged rows yet); CorruptCheckpoint
// when `bytes` are not what layout_record_for makes. Checks only the encoding:
// read_checkpoint_layout_from_record checks what the record says.
StoredFileV3 decode_layout_record(std::span<const std::byte> bytes);

}  // namespace epochrun
