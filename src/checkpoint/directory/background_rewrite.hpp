// A file that rank 0 rewrites from its view of the committed checkpoints on a thread of its
// own (index.json, the XDMF file): written durably (a temporary file, fsync, rename, directory
// fsync), and those two fsyncs cost a commit more than the checkpoint's own (measured by
// `epochrun bench --scale`: 11 ms of an 18 ms save of 64 KiB per rank on ext4); such a file is
// not the commit point (the rename of the checkpoint is), so the job need not wait for it.
//
// The job's thread only says that the view changed; this thread builds the text when it
// writes. Building and writing it grows with the history, so neither happens on the job's
// thread, and the writes are paced: after a write that took t, the next begins no sooner than
// kPace t later, so that a long history's writes take a small share of a core beside the job
// (on 2 cores with 3 ranks, every share counts). Changes made meanwhile are written together. A
// run that is killed may leave the file a few commits behind, as a crash between a commit and
// its rewrite always could (docs/FORMAT.md, "index.json").
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace epochrun {

class BackgroundRewrite {
 public:
  // `rewrite` builds and writes the file (on this thread only); a failure is a warning in the
  // log after `what`, and the next change rewrites it.
  BackgroundRewrite(std::string what, std::function<void()> rewrite);
  // Writes what changed still, at once, then stops.
  ~BackgroundRewrite();
  BackgroundRewrite(const BackgroundRewrite&) = delete;
  BackgroundRewrite& operator=(const BackgroundRewrite&) = delete;

  // The view changed: the file is rewritten soon.
  void changed();
  // Returns once the file of this moment is written (or failed), at once rather than at its
  // pace, so that the caller may remove the file without a write recreating it after.
  void flush();

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kPace = 4;

  void work();

  std::string what_;
  std::function<void()> rewrite_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable written_;
  bool changed_ = false;
  bool writing_ = false;
  int flushing_ = 0;
  bool stopping_ = false;
  Clock::time_point next_write_{};
  std::thread worker_;  // last: started once everything it uses exists
};

}  // namespace epochrun
