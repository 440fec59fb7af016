// The checksum HDF5 puts at the end of its metadata (superblock, object header chunks, heaps):
// Bob Jenkins' lookup3 hash ("hashlittle") with seed 0. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace epochrun {

std::uint32_t hdf5_metadata_checksum(std::span<const std::byte> bytes);

}  // namespace epochrun
