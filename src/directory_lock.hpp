// One run at a time per checkpoint directory. Internal to the library.
//
// Why: a second run started on the same directory would take the first one's in-flight
// temporary file for the leftover of a crash and delete it, and the two would commit over each
// other's epochs. Nothing about two such runs can end well, so the second is refused.
#pragma once

#include <filesystem>
#include <string>

#include "file_descriptor.hpp"

namespace epochrun {

inline constexpr char kLockFileName[] = ".epochrun.lock";

class DirectoryLock {
 public:
  // Takes an exclusive flock(2) on <directory>/.epochrun.lock (creating the directory and the
  // file), recording this process's pid and host in it. The kernel drops the lock when the
  // process dies, so a killed run never leaves a stale lock behind.
  //
  // Throws CheckpointError naming the holder when another process holds the lock. When no
  // lock can be taken at all -- the directory cannot be created or written, the file system
  // has no locks -- nothing is held and unavailable_reason() says why: the run goes on, as it
  // does when its saves fail there.
  explicit DirectoryLock(const std::filesystem::path& directory);
  // Removes the lock file while still holding the lock (see the constructor for why that is
  // safe), then releases it.
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  bool held() const { return fd_.valid(); }
  const std::string& unavailable_reason() const { return unavailable_reason_; }

 private:
  std::filesystem::path file_;
  FileDescriptor fd_{-1};
  std::string unavailable_reason_;
};

}  // namespace epochrun
