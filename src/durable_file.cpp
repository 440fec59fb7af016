#include "durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"

namespace epochrun {
namespace {

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

// fsync through a read-only descriptor: works for directories, and for a file that another
// process (another rank) wrote.
void fsync_path(const std::filesystem::path& path, int open_flags, const std::string& what) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | open_flags));
  if (fd.get() < 0) {
    throw Error(errno_message("open " + what + " " + path.string() + " for fsync"));
  }
  if (::fsync(fd.get()) != 0) {
    throw Error(errno_message("fsync " + what + " " + path.string()));
  }
  fd.close(path.string());
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

void fsync_file(const std::filesystem::path& file) {
  fsync_path(file, O_NOFOLLOW, "file");
}

void fsync_directory(const std::filesystem::path& directory) {
  fsync_path(directory, O_DIRECTORY, "directory");
}

void create_private_directories(const std::filesystem::path& directory) {
  std::filesystem::path partial;
  for (const auto& component : directory) {
    partial /= component;
    if (::mkdir(partial.c_str(), 0755) == 0) {
      continue;
    }
    if (errno != EEXIST) {
      throw Error(errno_message("create directory " + partial.string()));
    }
    struct stat status {};
    if (::stat(partial.c_str(), &status) != 0 || !S_ISDIR(status.st_mode)) {
      throw Error("create directory " + partial.string() + ": a non-directory is in the way");
    }
  }
}

void rename_durably(const std::filesystem::path& temporary, const std::filesystem::path& target) {
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    throw Error(errno_message("rename to " + target.string()));
  }
  fsync_directory(target.parent_path().empty() ? "." : target.parent_path());
}

int remove_stale_temporaries(const std::filesystem::path& directory) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(".") && name.find(".tmp.") != std::string::npos &&
        entry.is_regular_file() && !entry.is_symlink() && ::unlink(entry.path().c_str()) == 0) {
      ++removed;
    }
  }
  return removed;
}

std::filesystem::path temporary_sibling(const std::filesystem::path& target) {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  return target.parent_path() /
         ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(generator() % 1000000000));
}

void write_file_atomically(const std::filesystem::path& target, std::string_view content) {
  replace_atomically(target, [&](int fd, const std::string& what) {
    write_all(fd, content.data(), content.size(), what);
  });
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
