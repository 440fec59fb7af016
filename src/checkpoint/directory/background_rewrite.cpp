#include "background_rewrite.hpp"

#include <spdlog/spdlog.h>

namespace epochrun {

BackgroundRewrite::BackgroundRewrite(std::string what, std::function<void()> rewrite)
    : what_(std::move(what)), rewrite_(std::move(rewrite)), worker_([this] { work(); }) {}

BackgroundRewrite::~BackgroundRewrite() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void BackgroundRewrite::changed() {
  {
    std::lock_guard lock(mutex_);
    changed_ = true;
  }
  wake_.notify_one();
}

void BackgroundRewrite::flush() {
  std::unique_lock lock(mutex_);
  ++flushing_;
  wake_.notify_one();
  written_.wait(lock, [this] { return !changed_ && !writing_; });
  --flushing_;
}

void BackgroundRewrite::work() {
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
      rewrite_();
    } catch (const std::exception& error) {
      // Not the commit point; the next change rewrites it.
      spdlog::warn("{}: {}", what_, error.what());
    }
    const auto end = Clock::now();
    lock.lock();
    next_write_ = end + kPace * (end - start);
    writing_ = false;
    written_.notify_all();
  }
}

}  // namespace epochrun
