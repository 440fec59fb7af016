// Rank 0 writes index.json on a thread of its own. The catalogue is written durably (a
// temporary file, fsync, rename, directory fsync), and those two fsyncs cost a commit more than
// the checkpoint's own (measured by `epochrun bench --scale`: 11 ms of an 18 ms save of 64 KiB
// per rank on ext4); the index is not the commit point (the rename of the checkpoint is), so the
// job need not wait for it. Only the newest text matters: one superseded before its turn is
// never written. A run that is killed may leave the index one commit behind, as a crash between
// a commit and its index update always could (docs/FORMAT.md, "index.json").
#pragma once

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace epochrun {

class BackgroundIndex {
 public:
  explicit BackgroundIndex(std::filesystem::path file);
  // Writes the text still pending, then stops.
  ~BackgroundIndex();
  BackgroundIndex(const BackgroundIndex&) = delete;
  BackgroundIndex& operator=(const BackgroundIndex&) = delete;

  // Hands over the index's new text. A failure to write it is a warning in the log.
  void write(std::string text);
  // Returns once every text handed over is written (or failed), so that the caller may remove
  // the file without a write recreating it after.
  void flush();

 private:
  void work();

  std::filesystem::path file_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable written_;
  std::optional<std::string> pending_;
  bool writing_ = false;
  bool stopping_ = false;
  std::thread worker_;  // last: started once everything it uses exists
};

}  // namespace epochrun
