// One run at a time per checkpoint directory. Internal to the library.
//
// Why: a second run started on the same directory would take the first one's in-flight
// temporary file for the leftover of a crash and delete it, and the two would commit over each
// other's epochs. Nothing about two such runs can end well, so the second is refused.
//
// The protocol holds on a network file system whose clients cache names and contents
// independently (another host may see a removed name, or the old contents of a file, for about
// a second): the lock file is never removed, so a lock is never taken on a file that has just
// lost its name; a lock on a file that nevertheless lost it (removed by hand, or by an older
// epochrun) is recognised by reading the holder's record back through its name; ESTALE means
// "open the name again", for a bounded time.
#pragma once

#include <filesystem>
#include <string>

#include "file_descriptor.hpp"

namespace epochrun {

inline constexpr char kLockFileName[] = ".epochrun.lock";

class DirectoryLock {
 public:
  // Takes an exclusive flock(2) on <directory>/.epochrun.lock (creating the directory and the
  // file) and writes this run's record into it: "pid 1234 on node17, run <16 hex digits>". The
  // kernel (or the network file system's server) drops the lock when the process dies, so a
  // killed run never leaves a stale lock behind.
  //
  // Throws CheckpointError naming the holder when another process holds the lock (after a
  // grace of two seconds, in which a run that has just ended lets go of it), and
  // CheckpointError saying why when no lock can be taken at all (the directory cannot be
  // created or written, something other than a regular file has the lock's name, the file
  // system has no locks, the lock file stays stale): a run that went on unlocked could share
  // the directory with another run unnoticed, so only the user may choose that
  // (RunOptions::directory_lock).
  explicit DirectoryLock(const std::filesystem::path& directory);
  // Empties the record and releases the lock; the file stays (see the header's comment).
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  std::filesystem::path file_;
  FileDescriptor fd_{-1};
};

}  // namespace epochrun
