// Making sure a file of a known size fits before writing it, and that the room stays there
// while it is written. Internal to the library.
//
// Why: a save refused up front costs nothing, while one that meets a full disk half-way has
// written gigabytes for nothing; and space that another process takes while a checkpoint is
// written must not make that checkpoint fail.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace epochrun {

// Throws Error when this process's file-size limit (ulimit -f) is below `bytes`: a write past
// it would kill the process with SIGXFSZ rather than fail.
void check_file_size_limit(std::uint64_t bytes);

// Bytes available to this user on the file system holding `directory`; none when it cannot
// be asked (the save itself then reports why the directory is unusable).
std::optional<std::uint64_t> available_bytes(const std::filesystem::path& directory);

// Throws Error ("not enough space: ...") when the file system holding `directory` has fewer
// than `bytes` available to this user.
void check_free_space(const std::filesystem::path& directory, std::uint64_t bytes);

// Allocates disk blocks for the first `bytes` of the file open as `fd` without changing its size
// (fallocate, FALLOC_FL_KEEP_SIZE), so that writes inside that range cannot fail with ENOSPC
// even if another process fills the disk meanwhile. Returns false when the file system
// cannot reserve (NFSv3 and some others); the free-space check is then all there is.
// Throws Error when the room is not there, after giving back any part it got.
bool reserve_space(int fd, std::uint64_t bytes);

// Gives back blocks reserved beyond the end of the file open as `fd` once it is complete.
// Throws Error.
void release_space_beyond_end(int fd);

}  // namespace epochrun
