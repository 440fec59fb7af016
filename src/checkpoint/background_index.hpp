// Rank 0 writes index.json on a thread of its own. The catalogue is written durably (a
// temporary file, fsync, rename, directory fsync), and those two fsyncs cost a commit more than
// the checkpoint's own (measured by `epochrun bench --scale`: 11 ms of an 18 ms save of 64 KiB
// per rank on ext4); the index is not the commit point (the rename of the checkpoint is), so the
// job need not wait for it.
//
// The job's thread only says that the index changed; this thread takes the index's text when it
// writes. Building and writing the text grows with the history (about 70 bytes per committed
// epoch), so neither happens on the job's thread, and the writes are paced: after a write that
// took t, the next begins no sooner than kPace t later, so that a long history's writes take a
// small share of a core beside the job (on 2 cores with 3 ranks, every share counts). Changes
// made meanwhile are written together. A run that is killed may leave the index a few commits
// behind, as a crash between a commit and its index update always could (docs/FORMAT.md,
// "index.json").
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "checkpoint_index.hpp"

namespace epochrun {

class BackgroundIndex {
 public:
  // Writes `index`'s text to index->file() when told; `index` must outlive this.
  explicit BackgroundIndex(const CheckpointIndex& index);
  // Writes what changed still, at once, then stops.
  ~BackgroundIndex();
  BackgroundIndex(const BackgroundIndex&) = delete;
  BackgroundIndex& operator=(const BackgroundIndex&) = delete;

  // The index changed: its text is written soon. A failure to write it is a warning in the log.
  void changed();
  // Returns once the index's text of this moment is written (or failed), at once rather than
  // at its pace, so that the caller may remove the file without a write recreating it after.
  void flush();

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kPace = 4;

  void work();

  const CheckpointIndex& index_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable written_;
  bool changed_ = false;
  bool writing_ = false;
  int flushing_ = 0;
  bool stopping_ = false;
  Clock::time_point next_write_{};
  std::string text_;    // the worker's, the last text it wrote
  std::thread worker_;  // last: started once everything it uses exists
};

}  // namespace epochrun
