// A checkpoint file's HDF5 side: its groups, attributes and datasets, and where each dataset's
// bytes lie. Internal to the library.
//
// HDF5 is used serially, by one process, for the layout and the metadata only; the blobs'
// bytes are moved with pwrite/pread at the datasets' offsets by the rank that owns them. So no
// collective HDF5 or MPI-IO call is ever made, and a rank that fails cannot leave the others
// inside one (parallel HDF5 1.10 has no symmetric error path: they would wait forever).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"
#include "integrity_header.hpp"

namespace epochrun {

// A checkpoint's header and, per node, the file offset of each blob's bytes in save order (0 for
// a blob of no bytes, which has no storage).
struct CheckpointLayout {
  CheckpointHeader header;
  std::map<std::string, std::vector<std::uint64_t>> offsets;
};

// Lays out the checkpoint `header` describes in the empty file open read-write as `fd`: user
// block of `user_block_size` bytes (left for the integrity header), root attributes,
// /nodes/<node> groups, and every blob's dataset with its xxh64 -- contiguous, allocated now,
// never filled. Closes HDF5's view of it (the file then has its final size) and returns where
// each blob's bytes go. Throws Hdf5Error.
CheckpointLayout lay_out_checkpoint_file(int fd, const CheckpointHeader& header,
                                         std::uint64_t user_block_size);

// Reads the header and the blobs' offsets of the checkpoint file open as `fd`, whose integrity
// header `integrity` was verified. Before any data is read, refuses (CorruptCheckpoint) every
// dataset whose layout is not the one lay_out_checkpoint_file writes -- external storage,
// virtual, compact or chunked layout, filters -- and any whose bytes are not exactly one of the
// integrity header's extents. CheckpointMismatch for another format version.
CheckpointLayout read_checkpoint_layout(int fd, const IntegrityHeader& integrity);

}  // namespace epochrun
