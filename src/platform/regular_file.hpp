// Checkpoint files opened so that only regular files are ever read or written, and read or
// written at offsets. Internal to the library.
//
// Why: a name in a checkpoint directory can be swapped for a FIFO, a device or a symlink at any
// moment (by rename); opening such a thing for reading can block forever or read a foreign
// file. These opens never follow a symlink, never block, and refuse anything but a regular file.
// Libraries that open paths themselves (HDF5) are handed descriptor_path() so that they open
// the very file that was checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"

namespace epochrun {

// Read-only. Throws CheckpointNotFound when `file` does not exist (it may have been deleted
// since it was listed), CorruptCheckpoint when it is not a regular file (a FIFO, a directory,
// a symlink), CheckpointError for any other failure.
FileDescriptor open_regular_file_for_reading(const std::filesystem::path& file);

// A file that read_regular_file refuses to read for its size: larger than its kind ever is, so
// damaged (a sparse file of terabytes, say, whose read would exhaust memory before it failed).
class FileTooLarge : public CorruptCheckpoint {
 public:
  using CorruptCheckpoint::CorruptCheckpoint;
};

// The whole of `file`, opened as open_regular_file_for_reading opens it and throwing as it does:
// a manifest or a log (runs.jsonl, metrics.jsonl) read without ever waiting on a FIFO put under
// its name. FileTooLarge, before any byte is read, when it holds more than `max_bytes`: each
// caller's bound for its kind of file.
std::string read_regular_file(const std::filesystem::path& file, std::uint64_t max_bytes);

// Write-only, for a file this run created (read-write with kAlsoRead: a file whose pages are
// mapped to be written, which a write-only descriptor cannot map). Throws Error when it cannot
// be opened or is not a regular file.
enum class WriteAccess { kWriteOnly, kAlsoRead };
FileDescriptor open_regular_file_for_writing(const std::filesystem::path& file,
                                             WriteAccess access = WriteAccess::kWriteOnly);
// The same with O_DIRECT; an invalid descriptor when the file system does not do direct I/O
// (tmpfs on older kernels, some FUSE file systems) or the file is not a regular file.
FileDescriptor open_for_direct_writing(const std::filesystem::path& file);

// Creates `file`, which must not exist (O_EXCL, never through a symlink), read-write, with mode
// 0644 from its first instant: under no umask can another user open it for writing. Throws
// Error.
FileDescriptor create_new_file(const std::filesystem::path& file);

// "/proc/self/fd/N": a path through which this process reopens exactly the open file `fd`,
// whatever was renamed over its name since.
std::string descriptor_path(int fd);

// The file's size (fstat). Throws Error.
std::uint64_t file_size(int fd);

// fsync(2); `what` names the file in the error. Throws Error.
void sync_file(int fd, const std::string& what);

// pread/pwrite of exactly `bytes` at `offset`, retrying short transfers. read_at throws
// CorruptCheckpoint at the end of the file (`what` names it); both throw Error on an I/O error.
void read_at(int fd, std::uint64_t offset, std::span<std::byte> bytes, const std::string& what);
// The same for the consecutive bytes at `offset` that fill `buffers` in order (preadv): many
// small blobs adjacent in a file are read in a few system calls, straight into their memory.
void read_at(int fd, std::uint64_t offset, std::span<const std::span<std::byte>> buffers,
             const std::string& what);
void write_at(int fd, std::uint64_t offset, std::span<const std::byte> bytes,
              const std::string& what);

}  // namespace epochrun
