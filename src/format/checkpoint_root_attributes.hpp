// The attributes of a checkpoint file's root group (docs/FORMAT.md): what the header says of
// the whole checkpoint. Internal to checkpoint_layout.
#pragma once

#include <hdf5.h>

#include <cstdint>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// Writes `header`'s root attributes, its format version included.
void write_root_attributes(hid_t file, const CheckpointHeader& header);

// Reads them from an untrusted file of `file_bytes` bytes into `header` (its blobs are the
// node readers'). CorruptCheckpoint for a file that is not an epochrun checkpoint or whose node
// list is damaged; CheckpointMismatch for a format version this epochrun does not read.
// `newest_version`: the newest format version the caller reads (the reader of versions 1 and 2
// passes 2).
void read_root_attributes(hid_t file, CheckpointHeader& header, std::uint64_t file_bytes,
                          std::int64_t newest_version = kCheckpointFormatVersion);

}  // namespace epochrun
