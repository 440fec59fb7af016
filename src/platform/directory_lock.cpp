#include "directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "host_name.hpp"
#include "random_token.hpp"

namespace epochrun {
namespace {

using Clock = std::chrono::steady_clock;

// How long a lock file that is stale (ESTALE, or a file that lost its name) is opened again
// before the run is refused. A network file system's client forgets a removed name within
// about a second (GlusterFS's default entry and attribute timeouts are 1 s).
constexpr auto kStaleWindow = std::chrono::seconds(10);
// How long a held lock is tried again before the run is refused: a process that has just ended
// may still hold it for a moment on a network file system, where its descriptors are released
// after it exits.
constexpr auto kReleaseGrace = std::chrono::seconds(2);
constexpr auto kRetryPause = std::chrono::milliseconds(50);
constexpr std::size_t kRecordLimit = 255;

// "pid 1234 on node17, run 0123456789abcdef": who holds a lock, as its holder wrote it (best
// effort; empty when it could not be read).
std::string record_in(int fd) {
  char text[kRecordLimit + 1] = {};
  const ssize_t got = ::pread(fd, text, kRecordLimit, 0);
  std::string record = got > 0 ? std::string(text, static_cast<std::size_t>(got)) : "";
  for (auto& c : record) {
    if (c < 0x20 || c > 0x7e) {
      c = ' ';
    }
  }
  return record;
}

// The record in the file that `path` names now, read through a new descriptor; nullopt when the
// name leads nowhere (ENOENT, ESTALE).
std::optional<std::string> record_named(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return std::nullopt;
  }
  return record_in(fd.get());
}

bool same_file(int fd, const std::filesystem::path& path) {
  struct stat opened {
  }, named{};
  return ::fstat(fd, &opened) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

// Replaces the file's contents with `record`, durably.
bool write_record(int fd, const std::string& record) {
  return ::pwrite(fd, record.data(), record.size(), 0) == static_cast<ssize_t>(record.size()) &&
         ::ftruncate(fd, static_cast<off_t>(record.size())) == 0 && ::fsync(fd) == 0;
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

// One attempt at the lock: locked (the descriptor), held by another process (its record), or
// stale (why): open the name again.
struct Attempt {
  enum Outcome { kLocked, kHeld, kStale } outcome;
  FileDescriptor fd{-1};
  std::string detail;
};

Attempt try_lock(const std::filesystem::path& directory, const std::filesystem::path& file,
                 const std::string& record) {
  FileDescriptor fd(
      ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    if (errno == ELOOP) {  // O_NOFOLLOW met a symlink, dangling or not
      refuse_obstacle(directory, file, "a symbolic link");
    }
    if (errno == EISDIR) {
      refuse_obstacle(directory, file, "a directory");
    }
    if (errno == ESTALE) {
      return {Attempt::kStale, FileDescriptor(-1), errno_message("open " + file.string())};
    }
    refuse(directory, errno_message("open " + file.string()),
           std::string("make the directory writable, or ") + kRunUnlocked);
  }
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) {
    return {Attempt::kStale, FileDescriptor(-1), errno_message("stat " + file.string())};
  }
  if (!S_ISREG(status.st_mode)) {
    refuse_obstacle(directory, file, "not a regular file");
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return {Attempt::kHeld, FileDescriptor(-1), record_in(fd.get())};
    }
    if (errno == ESTALE) {  // another host removed the file this descriptor was opened on
      return {Attempt::kStale, FileDescriptor(-1), errno_message("lock " + file.string())};
    }
    refuse(directory, errno_message("lock " + file.string()),
           std::string("on a file system without flock, ") + kRunUnlocked);
  }
  // Locked, but perhaps a file that has lost its name since it was opened: this host sees that
  // at once, another host's removal only through the record read back by name (a removed
  // name gives no file, a new one another record; a cached name of the removed file is not
  // opened again).
  const std::string replaced = "the lock file " + file.string() + " was replaced";
  if (!same_file(fd.get(), file)) {
    return {Attempt::kStale, FileDescriptor(-1), replaced};
  }
  if (!write_record(fd.get(), record)) {
    if (errno == ESTALE) {
      return {Attempt::kStale, FileDescriptor(-1), errno_message("write " + file.string())};
    }
    // A full disk, say: the lock is held all the same, only unrecorded; the name was checked.
    return {Attempt::kLocked, std::move(fd), ""};
  }
  if (record_named(file) != record) {
    return {Attempt::kStale, FileDescriptor(-1), replaced};
  }
  return {Attempt::kLocked, std::move(fd), ""};
}

}  // namespace

DirectoryLock::DirectoryLock(const std::filesystem::path& directory)
    : file_(directory / kLockFileName) {
  try {
    create_private_directories(directory);
  } catch (const std::exception& error) {
    refuse(directory, error.what(), std::string("fix that, or ") + kRunUnlocked);
  }
  const std::string record =
      "pid " + std::to_string(::getpid()) + " on " + host_name() + ", run " + random_token();
  const auto started = Clock::now();
  while (true) {
    auto attempt = try_lock(directory, file_, record);
    const auto waited = Clock::now() - started;
    if (attempt.outcome == Attempt::kLocked) {
      fd_ = std::move(attempt.fd);
      return;
    }
    if (attempt.outcome == Attempt::kHeld && waited >= kReleaseGrace) {
      throw CheckpointError("checkpoint directory " + directory.string() +
                            " is in use by another run (" +
                            (attempt.detail.empty() ? "unknown process" : attempt.detail) +
                            "); one run per directory");
    }
    if (attempt.outcome == Attempt::kStale && waited >= kStaleWindow) {
      refuse(directory,
             attempt.detail + ", still after " +
                 std::to_string(std::chrono::seconds(kStaleWindow).count()) + " s",
             std::string("try again, or ") + kRunUnlocked);
    }
    std::this_thread::sleep_for(kRetryPause);
  }
}

DirectoryLock::~DirectoryLock() {
  // The next holder writes its own record; an empty one is never taken for a live holder. An
  // explicit unlock, because close(2) on a network file system may release the lock only after
  // this process has exited.
  if (::ftruncate(fd_.get(), 0) != 0) {
    // Only the record stays: a holder whose lock is free is not taken for a live one.
  }
  ::flock(fd_.get(), LOCK_UN);
}

}  // namespace epochrun
