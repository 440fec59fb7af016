#include "disk_space.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// Truncating to the current size frees the blocks a KEEP_SIZE reservation left past the end.
void truncate_to_own_size(int fd) {
  struct stat status {};
  if (::fstat(fd, &status) != 0 || ::ftruncate(fd, status.st_size) != 0) {
    throw Error(errno_message("give back the space reserved past the end of the checkpoint"));
  }
}

}  // namespace

void check_file_size_limit(std::uint64_t bytes) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur < bytes) {
    throw Error("the file size limit (ulimit -f) of " + std::to_string(limit.rlim_cur) +
                " bytes is below the checkpoint's estimated " + std::to_string(bytes) + " bytes");
  }
}

std::optional<std::uint64_t> available_bytes(const std::filesystem::path& directory) {
  struct statvfs space {};
  if (::statvfs(directory.empty() ? "." : directory.c_str(), &space) != 0) {
    return std::nullopt;
  }
  return std::uint64_t(space.f_bavail) * space.f_frsize;
}

void check_free_space(const std::filesystem::path& directory, std::uint64_t bytes) {
  const auto available = available_bytes(directory);
  if (available && *available < bytes) {
    throw Error("not enough space: the checkpoint needs about " + std::to_string(bytes) +
                " bytes, " + std::to_string(*available) + " are available");
  }
}

bool reserve_space(int fd, std::uint64_t bytes) {
  if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0) {
    return true;
  }
  const int cause = errno;
  if (cause == EOPNOTSUPP || cause == ENOSYS) {
    return false;
  }
  // A failed fallocate may keep what it got; leave the disk as it was.
  truncate_to_own_size(fd);
  errno = cause;
  if (cause == ENOSPC || cause == EDQUOT) {
    throw Error(errno_message("not enough space: cannot reserve " + std::to_string(bytes) +
                              " bytes for the checkpoint"));
  }
  throw Error(errno_message("reserve " + std::to_string(bytes) + " bytes for the checkpoint"));
}

void release_space_beyond_end(int fd) {
  truncate_to_own_size(fd);
}

}  // namespace epochrun
