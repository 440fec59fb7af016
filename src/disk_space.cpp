#include "disk_space.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <string>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"

namespace epochrun {
namespace {

FileDescriptor open_for_writing(const std::filesystem::path& file, const std::string& why) {
  FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    throw Error(errno_message("open " + file.string() + " to " + why));
  }
  return fd;
}

// Truncating to the current size frees the blocks a KEEP_SIZE reservation left past the end.
void truncate_to_own_size(int fd, const std::filesystem::path& file) {
  struct stat status {};
  if (::fstat(fd, &status) != 0 || ::ftruncate(fd, status.st_size) != 0) {
    throw Error(errno_message("give back the space reserved past the end of " + file.string()));
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

void check_free_space(const std::filesystem::path& directory, std::uint64_t bytes) {
  struct statvfs space {};
  if (::statvfs(directory.empty() ? "." : directory.c_str(), &space) != 0) {
    return;  // the save itself will report why the directory is unusable
  }
  const std::uint64_t available = std::uint64_t(space.f_bavail) * space.f_frsize;
  if (available < bytes) {
    throw Error("not enough space: the checkpoint needs about " + std::to_string(bytes) +
                " bytes, " + std::to_string(available) + " are available");
  }
}

bool reserve_space(const std::filesystem::path& file, std::uint64_t bytes) {
  auto fd = open_for_writing(file, "reserve space");
  if (::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0) {
    return true;
  }
  const int cause = errno;
  if (cause == EOPNOTSUPP || cause == ENOSYS) {
    return false;
  }
  // A failed fallocate may keep what it got; leave the disk as it was for HDF5's own writes.
  truncate_to_own_size(fd.get(), file);
  errno = cause;
  if (cause == ENOSPC || cause == EDQUOT) {
    throw Error(errno_message("not enough space: cannot reserve " + std::to_string(bytes) +
                              " bytes for the checkpoint"));
  }
  throw Error(errno_message("reserve " + std::to_string(bytes) + " bytes for " + file.string()));
}

void release_space_beyond_end(const std::filesystem::path& file) {
  auto fd = open_for_writing(file, "give back reserved space");
  truncate_to_own_size(fd.get(), file);
  fd.close(file.string());
}

}  // namespace epochrun
