// How a global array's bytes reach the shared checkpoint file in a save (`--array-io`): each
// rank writes its block itself, with direct I/O, where the block is one contiguous range of the
// dataset's bytes (a band of whole rows); or the ranks write together with one collective
// MPI-IO call. Either way a save stays one collective operation into one file, and
// the file's bytes, checksums and layout are the same (docs/FORMAT.md, "How a global array is
// written").
#pragma once

#include <optional>
#include <string_view>

namespace epochrun {

enum class ArrayIo {
  // Direct per-rank writes where every rank's block is contiguous (row bands) and the file
  // system is one known to take them safely (a local ext4 or XFS); collective MPI-IO otherwise.
  kAuto,
  // Direct per-rank writes wherever every rank's block is contiguous, whatever the file system
  // (the user vouches for it); collective MPI-IO for interleaved blocks.
  kDirect,
  // Always the collective MPI-IO write (two-phase I/O through the page cache).
  kMpiIo,
};

inline constexpr std::string_view array_io_name(ArrayIo io) {
  switch (io) {
    case ArrayIo::kDirect:
      return "direct";
    case ArrayIo::kMpiIo:
      return "mpiio";
    case ArrayIo::kAuto:
      break;
  }
  return "auto";
}

inline std::optional<ArrayIo> parse_array_io(std::string_view name) {
  for (const auto io : {ArrayIo::kAuto, ArrayIo::kDirect, ArrayIo::kMpiIo}) {
    if (name == array_io_name(io)) {
      return io;
    }
  }
  return std::nullopt;
}

}  // namespace epochrun
