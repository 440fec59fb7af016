// A file opened collectively with MPI-IO, through which every rank writes or reads its block of
// a global array stored row-major at a known offset (a contiguous HDF5 dataset's bytes), with
// one collective call (MPI_File_write_all / read_all over a subarray file view): the MPI library
// merges the ranks' strided pieces into large contiguous requests (two-phase I/O). Internal to
// the library.
//
// Every call but hints_in_use, start_writeback and write_beside is collective over the
// communicator the file was opened with: all ranks must make it, in the same order, or they wait
// for each other. A caller agrees on every rank's readiness before the first (see
// agreement.hpp), and from there either agrees before each call or has every rank make every
// call, a rank that failed keeping its error until an agreement after the last, so that one
// rank's failure never leaves the others inside one.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/global_array.hpp"
#include "file_descriptor.hpp"

namespace epochrun {

// MPI-IO hints by name ("romio_cb_write" -> "enable", "cb_nodes" -> "2", "striping_factor"...),
// passed to MPI_File_open. An implementation ignores the hints it does not know.
using MpiIoHints = std::map<std::string, std::string>;

// Where a global array lies in a file: its bytes start at `offset`, row-major, each element
// `element_bytes` long.
struct StoredArray {
  std::uint64_t offset = 0;
  Shape global_shape;
  std::size_t element_bytes = 1;
};

class MpiIoFile {
 public:
  enum class Access { kRead, kWrite };

  // Collective: opens an existing `file` on every rank of `comm` (never creates it). MpiError
  // naming the file.
  MpiIoFile(const Communicator& comm, const std::filesystem::path& file, Access access,
            const MpiIoHints& hints);
  // Closes the file when it is still open (collective too: see the header comment).
  ~MpiIoFile();

  // Whether an open that fails on one rank fails on every rank of the communicator, by this
  // process's MPI-IO component: ROMIO agrees on the outcome inside MPI_File_open (it reduces
  // the ranks' error codes); Open MPI's OMPIO does not, and a rank that could not open leaves
  // the others in the next collective call. Open MPI loads its MPI-IO components at the
  // process's first MPI_File_open (from OMPI_MCA_io as it is then, which epochrun and its Python
  // package set to ROMIO unless the user chose) and keeps them: true once ROMIO's component is
  // loaded and no other, false before this process's first open and wherever the components
  // are not libraries of their own. No MPI call.
  static bool failed_open_fails_everywhere();
  MpiIoFile(const MpiIoFile&) = delete;
  MpiIoFile& operator=(const MpiIoFile&) = delete;

  // Collective: each rank writes `data`, its block of `array` (the block's elements, row-major),
  // into the file. A rank with an empty block takes part and writes nothing.
  void write_block_all(const StoredArray& array, const Block& block,
                       std::span<const std::byte> data);
  // This rank alone, no MPI call: asks the kernel to start writing the range of the file that
  // holds this rank's block of `array` to the disk, without waiting (sync_file_range), so that
  // the disk works while the other ranks are still writing and hashing; the final sync then
  // finds less to do. A hint: nothing happens where the file system does not take it.
  void start_writeback(const StoredArray& array, const Block& block) const;
  // Collective: each rank reads its block of `array` into `data`. Past the end of the file it
  // reads zeros and reports no error (ROMIO counts a collective read as complete): the caller
  // checks the file's size first (a checkpoint's integrity header records it) and the bytes'
  // checksums after.
  void read_block_all(const StoredArray& array, const Block& block, std::span<std::byte> data);

  // This rank alone, no MPI call (a file opened for writing): writes `bytes` at the file's byte
  // `offset` through a plain descriptor of the file, beside the collective writes (a block's
  // checksum, which is known only once the block is written); sync_and_close makes it durable
  // with them, with no open, collective step or agreement of its own.
  void write_beside(std::uint64_t offset, std::span<const std::byte> bytes);
  // Collective: MPI_File_sync (the written bytes reach the disk) and, when this rank wrote
  // beside them, an fsync of its plain descriptor (one client's MPI-IO sync need not flush what
  // another descriptor wrote on a network file system); then each rank drops from the page cache
  // the ranges it wrote (drop_from_page_cache, page_cache.hpp: the next save reuses those pages
  // warm; a save of heat_diffusion's 3 x 256 MiB field inside the job cost 1.92 times the raw
  // write with them kept, 0.99 dropped, docs/benchmarks.md), and MPI_File_close. The close is
  // made also when the sync failed on this rank, since every other rank makes it; the failure
  // is thrown after it. A resume on this host reads the file from the disk.
  void sync_and_close();
  // Collective: MPI_File_close.
  void close();

  // The hints in effect (MPI_File_get_info), which include the implementation's defaults.
  MpiIoHints hints_in_use() const;

 private:
  // Calls hint(fd, offset, bytes) with hints_fd_ and the range from the first to the last byte
  // of `block`; nothing for an empty block, or when the file did not open for them.
  template <typename Hint>
  void hint_for_block(const StoredArray& array, const Block& block, Hint&& hint) const;

  // Sets the view in which this rank's block of `array` is the file's only visible bytes, and
  // returns the MPI datatype of one element (committed; freed by the caller).
  MPI_Datatype set_block_view(const StoredArray& array, const Block& block);

  std::string context_;
  // A plain descriptor of a file opened for writing: for the hints and write_beside.
  FileDescriptor hints_fd_;
  bool wrote_beside_ = false;
  MPI_File file_ = MPI_FILE_NULL;
  // What this rank wrote (offset, bytes), dropped from the page cache once synced.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> written_;
};

}  // namespace epochrun
