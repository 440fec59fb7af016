// The one judge of a committed checkpoint file: whether it may be used at all, and what it holds
// when it may. Every reader of a committed file asks it first -- the resume (its rank 0, at any
// rank count, with or without a layout record), `latest`'s fallback, CheckpointReader and so
// `epochrun inspect --verify`, the node-local copies' load (which loads what the judge read of
// the shared file) and the upload -- so that no path uses a file another path refuses
// (docs/FORMAT.md, "What every reader checks"). Internal to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint_layout.hpp"
#include "checkpoint_layout_v3.hpp"
#include "integrity_header.hpp"

namespace epochrun {

// A committed file the judge let through.
struct JudgedCheckpoint {
  IntegrityHeader integrity;
  std::int64_t format_version = 0;
  std::optional<StoredFileV3> v3;         // format version 3
  std::optional<CheckpointLayout> older;  // format versions 1 and 2
};

// Judges the file open as `fd`, before any blob byte is read: the integrity header (its own
// checksum, its version, the file size), the metadata hash, then the layout -- from the layout
// record when the record names the metadata hash just verified (so it describes that very
// metadata), otherwise from HDF5, with every object checked against what the format defines and
// the record, when there is one, against what HDF5 holds. CorruptCheckpoint naming the object
// for anything it refuses (a format version it does not read included), CheckpointMismatch for
// an integrity header of another version; `what` names the file.
JudgedCheckpoint judge_checkpoint(int fd, const std::string& what);

}  // namespace epochrun
