// Which way each global array of a save reaches the shared file (--array-io): the seam between
// each rank writing its own block in the save's data step and the collective MPI-IO write.
// Internal to the library.
//
// A rank's block of a row-major array is one contiguous range of the dataset's bytes when it
// spans every dimension but its first (a band of whole rows, as the balanced decomposition into
// [R, 1, ...] gives): the access pattern ROMIO itself turns into independent I/O, since there is
// nothing to aggregate. Such a block is written by its rank alone (kDirect), in the save's data
// step, at the dataset's offset, with direct I/O where memory and file offset are page-aligned,
// hashed on the way, made durable with the rank's own fsync: no page cache, no collective call,
// and on a background thread no CPU taken from the job. Interleaved blocks (2-D grids), where
// two-phase aggregation matters, and file systems where writes of one file from several
// clients are unsafe or unknown (NFS, FUSE/GlusterFS, Lustre, anything unrecognised) take the
// collective MPI-IO write (kMpiIo). (Interleaved blocks written by each rank, a run per row
// through the page cache, were tried and dropped: at 96 ranks on 2 cores, eight ranks' runs
// share each page and their writes queued on the page locks, 0.86 s a save of 64 KiB per rank
// against 0.31 s collectively, docs/benchmarks-history.md, "Inside a job".) The bytes, the
// checksums and the layout are the same either way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_options.hpp"
#include "epochrun/array_io.hpp"
#include "epochrun/global_array.hpp"
#include "file_system_kind.hpp"
#include "mpi_io_file.hpp"

namespace epochrun {

// The path one global array took in a save.
enum class ArrayPath { kDirect, kMpiIo };

const char* array_path_name(ArrayPath path);

// Where `block` of a row-major array of `global_shape` lies among its elements when it is one
// contiguous run of them: its first element's index (the count is the block's element count).
// nullopt for an interleaved block. An empty block is contiguous (at 0: it writes nothing).
std::optional<std::uint64_t> contiguous_start(const Shape& global_shape, const Block& block);

// Whether `kind`, the file system of the file being saved, takes direct writes of one file from
// several processes safely: a file system of this host's own disks that is known to (ext4,
// XFS). Not a network or FUSE file system, not tmpfs (no direct I/O), not an unknown one.
bool direct_writes_safe(const FileSystemKind& kind);

// The path of an array whose blocks (index = rank) are `blocks`, on a file system for which
// direct_writes_safe said `file_system_safe`: kDirect when every block is contiguous and either
// the file system is safe or the user asked for direct writes; kMpiIo otherwise.
ArrayPath choose_array_path(ArrayIo requested, const Shape& global_shape,
                            const std::vector<Block>& blocks, bool file_system_safe);

}  // namespace epochrun
