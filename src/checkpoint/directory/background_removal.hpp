// Rank 0's deletion of retired checkpoint files on a thread of its own. Freeing a large file's
// blocks is slow where a save is writing back at the same time (ext4: 0.1 s for a 512 MiB file
// during an asynchronous save's writeback, measured), and the job waited for it at every epoch.
// The caller first renames each file to a temporary name (a rename is quick, and the epoch's
// name is free at once); this unlinks the temporaries in order and then fsyncs the directory.
// What a killed run leaves behind is an ordinary stale temporary, removed when the next run
// starts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

namespace epochrun {

class BackgroundRemoval {
 public:
  explicit BackgroundRemoval(std::filesystem::path directory);
  // Waits until every file handed over is deleted.
  ~BackgroundRemoval();
  BackgroundRemoval(const BackgroundRemoval&) = delete;
  BackgroundRemoval& operator=(const BackgroundRemoval&) = delete;

  // Deletes `file`, the temporary name the checkpoint of `epoch` was renamed to. A failure is a
  // warning in the log: nothing committed depends on it.
  void remove(std::int64_t epoch, std::filesystem::path file);
  // The size of the files handed over and not deleted yet.
  std::uint64_t pending_bytes() const;
  // Deletes every file handed over, holds or not, and returns once they are gone.
  void finish_pending();

  // While a Hold lives no deletion starts (one under way finishes; finish_pending overrides
  // it, for a save that may need the room): the job's own file-system work right after a
  // commit goes first. Freeing a large file stalls the file system's journal (ext4 mounted
  // with discard: 30 to 80 ms for 512 MiB), and the next save's lay-out on the job's thread
  // (its create and fallocate) waited for it. Null: holds nothing.
  class [[nodiscard]] Hold {
   public:
    explicit Hold(BackgroundRemoval* removal);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    BackgroundRemoval* removal_;
  };

 private:
  void work();

  struct Retired {
    std::int64_t epoch;
    std::filesystem::path file;
    std::uint64_t bytes;
  };

  std::filesystem::path directory_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;  // a batch was deleted
  std::deque<Retired> queue_;
  std::uint64_t pending_bytes_ = 0;  // queued or being deleted
  int holds_ = 0;
  int urgent_ = 0;         // callers of finish_pending waiting
  bool deleting_ = false;  // a batch taken from the queue is being deleted
  bool stopping_ = false;
  std::thread worker_;  // last: started once everything it uses exists
};

}  // namespace epochrun
