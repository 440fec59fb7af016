#include "background_index.hpp"

#include <spdlog/spdlog.h>

#include "durable_file.hpp"

namespace epochrun {

BackgroundIndex::BackgroundIndex(const CheckpointIndex& index)
    : index_(index), worker_([this] { work(); }) {}

BackgroundIndex::~BackgroundIndex() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void BackgroundIndex::changed() {
  {
    std::lock_guard lock(mutex_);
    changed_ = true;
  }
  wake_.notify_one();
}

void BackgroundIndex::flush() {
  std::unique_lock lock(mutex_);
  ++flushing_;
  wake_.notify_one();
  written_.wait(lock, [this] { return !changed_ && !writing_; });
  --flushing_;
}

void BackgroundIndex::work() {
  std::unique_lock lock(mutex_);
  const auto hurried = [this] { return stopping_ || flushing_ > 0; };
  for (;;) {
    wake_.wait(lock, [this] { return changed_ || stopping_; });
    if (!changed_) {
      return;  // stopping, and everything is written
    }
    wake_.wait_until(lock, next_write_, hurried);
    changed_ = false;
    writing_ = true;
    lock.unlock();
    const auto start = Clock::now();
    try {
      index_.text_into(text_);
      write_file_atomically(index_.file(), text_);
    } catch (const std::exception& error) {
      // A catalogue only; the next change rewrites it.
      spdlog::warn("index {}: {}", index_.file().string(), error.what());
    }
    const auto end = Clock::now();
    lock.lock();
    next_write_ = end + kPace * (end - start);
    writing_ = false;
    written_.notify_all();
  }
}

}  // namespace epochrun
