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
  // Throws CheckpointError naming the holder when another process holds the lock, and
  // CheckpointError saying why when no lock can be taken at all (the directory cannot be
  // created or written, something other than a regular file has the lock's name, the file
  // system has no locks): a run that went on unlocked could share the directory with another
  // run unnoticed, so only the user may choose that (RunOptions::directory_lock).
  explicit DirectoryLock(const std::filesystem::path& directory);
  // Removes the lock file while still holding the lock (see the constructor for why that is
  // safe), then releases it.
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  std::filesystem::path file_;
  FileDescriptor fd_{-1};
};

}  // namespace epochrun
