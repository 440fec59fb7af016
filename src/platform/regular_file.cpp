#include "regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "human_bytes.hpp"

namespace epochrun {
namespace {

// O_NONBLOCK: opening a FIFO without a writer would wait for one forever. It has no effect on
// regular files, so it stays set.
constexpr int kSafeOpenFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

bool is_regular(int fd) {
  struct stat status {};
  return ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode);
}

}  // namespace

FileDescriptor open_regular_file_for_reading(const std::filesystem::path& file) {
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | kSafeOpenFlags));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      throw CheckpointNotFound(errno_message("open " + file.string()));
    }
    if (errno == ELOOP) {
      throw CorruptCheckpoint(file.string() + " is a symlink, not a checkpoint file");
    }
    throw CheckpointError(errno_message("open " + file.string()));
  }
  if (!is_regular(fd.get())) {
    throw CorruptCheckpoint(file.string() + " is not a regular file");
  }
  return fd;
}

std::string read_regular_file(const std::filesystem::path& file, std::uint64_t max_bytes) {
  const auto fd = open_regular_file_for_reading(file);
  const auto size = file_size(fd.get());
  if (size > max_bytes) {
    throw FileTooLarge(file.string() + " holds " + human_bytes(double(size)) + ", more than the " +
                       human_bytes(double(max_bytes)) + " such a file can hold: it is damaged");
  }
  std::string text(size, '\0');
  read_at(fd.get(), 0, std::as_writable_bytes(std::span(text.data(), text.size())), file.string());
  return text;
}

FileDescriptor open_regular_file_for_writing(const std::filesystem::path& file,
                                             WriteAccess access) {
  FileDescriptor fd(::open(
      file.c_str(), (access == WriteAccess::kAlsoRead ? O_RDWR : O_WRONLY) | kSafeOpenFlags));
  if (!fd.valid()) {
    throw Error(errno_message("open " + file.string() + " for writing"));
  }
  if (!is_regular(fd.get())) {
    throw Error(file.string() + " is not a regular file");
  }
  return fd;
}

FileDescriptor open_for_direct_writing(const std::filesystem::path& file) {
  FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_DIRECT | kSafeOpenFlags));
  if (fd.valid() && !is_regular(fd.get())) {
    return FileDescriptor(-1);
  }
  return fd;
}

FileDescriptor create_new_file(const std::filesystem::path& file) {
  FileDescriptor fd(::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | kSafeOpenFlags, 0644));
  // The umask can only narrow 0644; fchmod makes it exactly 0644 (readable by the readers of
  // the checkpoint directory, writable by its owner alone).
  if (!fd.valid() || ::fchmod(fd.get(), 0644) != 0) {
    throw Error(errno_message("create " + file.string()));
  }
  return fd;
}

std::string descriptor_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

std::uint64_t file_size(int fd) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    throw Error(errno_message("fstat"));
  }
  return static_cast<std::uint64_t>(status.st_size);
}

void sync_file(int fd, const std::string& what) {
  if (::fsync(fd) != 0) {
    throw Error(errno_message("fsync " + what));
  }
}

void read_at(int fd, std::uint64_t offset, std::span<const std::span<std::byte>> buffers,
             const std::string& what) {
  std::vector<iovec> left;
  left.reserve(buffers.size());
  for (const auto& buffer : buffers) {
    if (!buffer.empty()) {
      left.push_back(iovec{buffer.data(), buffer.size()});
    }
  }
  for (std::size_t first = 0; first < left.size();) {
    const auto count = static_cast<int>(std::min<std::size_t>(left.size() - first, IOV_MAX));
    const ssize_t got = ::preadv(fd, &left[first], count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      throw Error(errno_message("read " + what + " at byte " + std::to_string(offset)));
    }
    if (got == 0) {
      throw CorruptCheckpoint(what + ": short read at byte " + std::to_string(offset));
    }
    offset += static_cast<std::uint64_t>(got);
    // Past the buffers filled; into the one filled in part.
    for (auto filled = static_cast<std::size_t>(got); filled > 0;) {
      auto& buffer = left[first];
      const auto step = std::min(filled, buffer.iov_len);
      buffer.iov_base = static_cast<std::byte*>(buffer.iov_base) + step;
      buffer.iov_len -= step;
      filled -= step;
      first += buffer.iov_len == 0 ? 1 : 0;
    }
  }
}

void read_at(int fd, std::uint64_t offset, std::span<std::byte> bytes, const std::string& what) {
  const std::span<std::byte> buffers[] = {bytes};
  read_at(fd, offset, buffers, what);
}

void write_at(int fd, std::uint64_t offset, std::span<const std::byte> bytes,
              const std::string& what) {
  while (!bytes.empty()) {
    const ssize_t written = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      throw Error(errno_message("write " + what + " at byte " + std::to_string(offset)));
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
    offset += static_cast<std::uint64_t>(written);
  }
}

}  // namespace epochrun
