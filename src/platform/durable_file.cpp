#include "durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "file_system_kind.hpp"
#include "random_token.hpp"

namespace epochrun {
namespace {

// temporary_sibling's name: "." + target + kTemporaryMarker + pid + "." + kRandomDigits hex.
constexpr char kTemporaryMarker[] = ".tmp.";
constexpr std::size_t kRandomDigits = kRandomTokenDigits;

void write_all(int fd, const char* data, std::size_t size, const std::string& what) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Error(errno_message("write " + what));
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
}

// Runs `fill(fd)` on a new temporary sibling of `target`, then commits it by rename.
template <typename Fill>
void replace_atomically(const std::filesystem::path& target, Fill fill,
                        const std::function<void()>& before_commit = {}) {
  const auto temporary = temporary_sibling(target);
  try {
    FileDescriptor fd(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      throw Error(errno_message("create " + temporary.string()));
    }
    fill(fd.get(), temporary.string());
    if (::fsync(fd.get()) != 0) {
      throw Error(errno_message("fsync " + temporary.string()));
    }
    fd.close(temporary.string());
    if (before_commit) {
      before_commit();
    }
    rename_durably(temporary, target);
  } catch (...) {
    ::unlink(temporary.c_str());  // a no-op once the rename happened
    throw;
  }
}

// The directory that holds the entry `path` names ("." for a bare name).
std::filesystem::path parent_directory(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : ".";
}

}  // namespace

void FileDescriptor::close(const std::string& what) {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    throw Error(errno_message("close " + what));
  }
}

std::string errno_message(std::string_view what) {
  return std::string(what) + ": " + std::strerror(errno);
}

void fsync_directory(const std::filesystem::path& directory) {
  // A directory opens only read-only; its fsync through that descriptor is what makes the
  // entries in it durable.
  FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY));
  if (fd.get() < 0) {
    throw Error(errno_message("open directory " + directory.string() + " for fsync"));
  }
  if (::fsync(fd.get()) != 0) {
    throw Error(errno_message("fsync directory " + directory.string()));
  }
  fd.close(directory.string());
}

void create_private_directories(const std::filesystem::path& directory) {
  // There already, as at every save but a run's first: one lookup, where a mkdir of each
  // component takes each parent's lock (one waited 1.3 ms for /tmp's while builds wrote there).
  struct stat existing {};
  if (::stat(directory.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode)) {
    return;
  }
  std::filesystem::path partial;
  std::vector<std::filesystem::path> created;
  for (const auto& component : directory) {
    partial /= component;
    if (::mkdir(partial.c_str(), 0755) == 0) {
      created.push_back(partial);
      continue;
    }
    if (errno != EEXIST) {
      throw Error(errno_message("create directory " + partial.string()));
    }
    // EEXIST says only that the name is taken: what it leads to may be unreachable (a dead
    // network mount answers ENOTCONN or ESTALE), and that is the cause to report.
    struct stat status {};
    if (::stat(partial.c_str(), &status) != 0) {
      throw Error(errno_message("create directory " + partial.string() + ": stat"));
    }
    if (!S_ISDIR(status.st_mode)) {
      throw Error("create directory " + partial.string() + ": a non-directory is in the way");
    }
  }
  // A new directory survives a power loss only once its entry in its parent is on disk. The
  // deepest first: no directory of the chain becomes durable before what this call created
  // beneath it.
  for (auto made = created.rbegin(); made != created.rend(); ++made) {
    fsync_directory(parent_directory(*made));
  }
}

void rename_durably(const std::filesystem::path& temporary, const std::filesystem::path& target) {
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    throw Error(errno_message("rename to " + target.string()));
  }
  fsync_directory(parent_directory(target));
}

void invalidate_cached_copies(const std::filesystem::path& file) {
  const FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    throw Error(errno_message("open " + file.string()));
  }
  // Clean pages only are dropped: every writer has fsynced, so that is all of them. Not on a
  // local file system, whose page cache no other host's writes go around: there the next read
  // (a resume, `inspect --verify`) would only go to the disk.
  if (const int failed = file_system_kind(fd.get()).local
                             ? 0
                             : ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
      failed != 0) {
    throw Error("drop the cached pages of " + file.string() + ": " + std::strerror(failed));
  }
  if (::utimensat(AT_FDCWD, file.c_str(), nullptr, 0) != 0) {
    throw Error(errno_message("set the modification time of " + file.string()));
  }
}

int remove_own_files(const std::filesystem::path& directory,
                     const std::function<bool(const std::string&)>& is_ours) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    // Never through a symlink, nor following one (a symlink loop would fail).
    if (is_ours(entry.path().filename().string()) && !entry.is_symlink(error) &&
        entry.is_regular_file(error) && ::unlink(entry.path().c_str()) == 0) {
      ++removed;
    }
  }
  return removed;
}

int remove_stale_temporaries(const std::filesystem::path& directory,
                             const std::function<bool(const std::string&)>& is_ours) {
  return remove_own_files(directory, [&](const std::string& name) {
    const auto target = temporary_target(name);
    return target && is_ours(*target);
  });
}

std::filesystem::path temporary_sibling(const std::filesystem::path& target) {
  return target.parent_path() / ("." + target.filename().string() + kTemporaryMarker +
                                 std::to_string(::getpid()) + "." + random_token());
}

std::optional<std::string> temporary_target(std::string_view name) {
  auto is_hex_digit = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  // From the end: the random part, the pid, the marker; what is left is the target.
  if (name.size() < kRandomDigits + 1 ||
      !std::all_of(name.end() - kRandomDigits, name.end(), is_hex_digit) ||
      name[name.size() - kRandomDigits - 1] != '.') {
    return std::nullopt;
  }
  name.remove_suffix(kRandomDigits + 1);
  const auto pid_start = name.find_last_not_of("0123456789") + 1;
  const auto pid = name.substr(pid_start);
  if (pid.empty() || pid.size() > 10 || pid.front() == '0') {
    return std::nullopt;
  }
  name.remove_suffix(pid.size());
  const std::string_view marker = kTemporaryMarker;
  if (!name.ends_with(marker) || name.size() < marker.size() + 2 || name.front() != '.') {
    return std::nullopt;
  }
  return std::string(name.substr(1, name.size() - marker.size() - 1));
}

void write_file_atomically(const std::filesystem::path& target, std::string_view content) {
  replace_atomically(target, [&](int fd, const std::string& what) {
    write_all(fd, content.data(), content.size(), what);
  });
}

void append_line(const std::filesystem::path& file, std::string_view line, bool sync) {
  std::error_code ignored;
  const bool existed = std::filesystem::exists(file, ignored);
  // Non-blocking, and for a regular file only: a FIFO under the name would make the open (no
  // reader) or the write (a full pipe) wait forever.
  FileDescriptor fd(::open(
      file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644));
  if (!fd.valid() && errno == ENXIO) {
    throw Error("cannot append to " + file.string() + ": not a regular file (a FIFO)");
  }
  if (!fd.valid()) {
    throw Error(errno_message("cannot open " + file.string()));
  }
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode)) {
    throw Error("cannot append to " + file.string() + ": not a regular file");
  }
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
      (sync && ::fsync(fd.get()) != 0)) {
    const auto message = errno_message("cannot append to " + file.string());
    if (!existed) {
      std::filesystem::remove(file, ignored);  // no empty file on a full disk
    }
    throw Error(message);
  }
  fd.close(file.string());
  if (sync && !existed) {
    fsync_directory(file.parent_path());
  }
}

void copy_file_atomically(const std::filesystem::path& source, const std::filesystem::path& target,
                          const std::function<void()>& before_commit) {
  FileDescriptor in(::open(source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (in.get() < 0) {
    throw Error(errno_message("open " + source.string()));
  }
  replace_atomically(
      target,
      [&](int out, const std::string& what) {
        std::vector<char> buffer(1 << 20);
        while (true) {
          ssize_t got = ::read(in.get(), buffer.data(), buffer.size());
          if (got < 0) {
            if (errno == EINTR) {
              continue;
            }
            throw Error(errno_message("read " + source.string()));
          }
          if (got == 0) {
            break;
          }
          write_all(out, buffer.data(), static_cast<std::size_t>(got), what);
        }
      },
      before_commit);
}

}  // namespace epochrun
