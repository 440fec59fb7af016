#include "directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// "pid 1234 on node17": who holds a lock, as its holder wrote it (best effort).
std::string holder_of(int fd) {
  char text[256] = {};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder = got > 0 ? std::string(text, static_cast<std::size_t>(got)) : "";
  for (auto& c : holder) {
    if (c < 0x20 || c > 0x7e) {
      c = ' ';
    }
  }
  return holder.empty() ? "unknown process" : holder;
}

std::string this_process() {
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  return "pid " + std::to_string(::getpid()) + " on " + host;
}

bool same_file(int fd, const std::filesystem::path& path) {
  struct stat opened {
  }, named{};
  return ::fstat(fd, &opened) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

bool is_regular_file(int fd) {
  struct stat status {};
  return ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode);
}

constexpr char kRunUnlocked[] = "pass --no-directory-lock to run unlocked";

[[noreturn]] void refuse(const std::filesystem::path& directory, const std::string& why,
                         const std::string& remedy) {
  throw CheckpointError("cannot lock checkpoint directory " + directory.string() + " (" + why +
                        "): without the lock another run could use it at the same time; " + remedy);
}

// Something other than a lock file has the lock's name: a leftover, most likely.
[[noreturn]] void refuse_obstacle(const std::filesystem::path& directory,
                                  const std::filesystem::path& file, const std::string& what) {
  refuse(directory, file.string() + " is " + what,
         std::string("remove it if no run is using the directory, or ") + kRunUnlocked);
}

}  // namespace

DirectoryLock::DirectoryLock(const std::filesystem::path& directory)
    : file_(directory / kLockFileName) {
  try {
    create_private_directories(directory);
  } catch (const std::exception& error) {
    refuse(directory, error.what(), std::string("fix that, or ") + kRunUnlocked);
  }
  // A run that ends unlinks the lock file while holding its lock, so a process that opened
  // the old file just before may lock an unlinked file: it checks that the name still leads
  // to what it locked, and starts over if not.
  for (int attempt = 0; attempt < 100; ++attempt) {
    FileDescriptor fd(
        ::open(file_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      if (errno == ELOOP) {  // O_NOFOLLOW met a symlink, dangling or not
        refuse_obstacle(directory, file_, "a symbolic link");
      }
      if (errno == EISDIR) {
        refuse_obstacle(directory, file_, "a directory");
      }
      refuse(directory, errno_message("open " + file_.string()),
             std::string("make the directory writable, or ") + kRunUnlocked);
    }
    if (!is_regular_file(fd.get())) {
      refuse_obstacle(directory, file_, "not a regular file");
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        throw CheckpointError("checkpoint directory " + directory.string() +
                              " is in use by another run (" + holder_of(fd.get()) +
                              "); one run per directory");
      }
      refuse(directory, errno_message("lock " + file_.string()),
             std::string("on a file system without flock, ") + kRunUnlocked);
    }
    if (!same_file(fd.get(), file_)) {
      continue;
    }
    const auto me = this_process();
    if (::ftruncate(fd.get(), 0) != 0 ||
        ::pwrite(fd.get(), me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
      // The lock is held all the same; only the message of a refused run is poorer.
    }
    fd_ = std::move(fd);
    return;
  }
  refuse(directory, "the lock file " + file_.string() + " kept being replaced",
         std::string("try again, or ") + kRunUnlocked);
}

DirectoryLock::~DirectoryLock() {
  ::unlink(file_.c_str());
}

}  // namespace epochrun
