// The node readers of each checkpoint format version, behind read_checkpoint_layout (which
// reads and checks the root attributes first). Internal to checkpoint_layout.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint_layout.hpp"
#include "checkpoint_layout_internal.hpp"

namespace epochrun {

// Fill layout.header.blobs, layout.offsets (and checksum_offsets) and layout.extents (sorted)
// for layout.header.node_names, from an untrusted file of `file_bytes` bytes.
void read_nodes_v1(hid_t file, CheckpointLayout& layout, std::uint64_t file_bytes);
void read_nodes_v2(hid_t file, CheckpointLayout& layout, std::uint64_t file_bytes);

// A name read from a file: a bad one means a damaged or crafted checkpoint, not bad user input.
void validate_stored_name(const std::string& name, std::string_view what);
// A stored shape's byte size, refused when it overflows or exceeds the file; `what` names the
// blob, built only for the error.
std::uint64_t checked_byte_size(const BlobRecord& record, std::uint64_t file_bytes,
                                const std::function<std::string()>& what);

}  // namespace epochrun
