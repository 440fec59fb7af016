#include "background_index.hpp"

#include <spdlog/spdlog.h>

#include "durable_file.hpp"

namespace epochrun {

BackgroundIndex::BackgroundIndex(std::filesystem::path file)
    : file_(std::move(file)), worker_([this] { work(); }) {}

BackgroundIndex::~BackgroundIndex() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void BackgroundIndex::write(std::string text) {
  {
    std::lock_guard lock(mutex_);
    pending_ = std::move(text);
  }
  wake_.notify_one();
}

void BackgroundIndex::flush() {
  std::unique_lock lock(mutex_);
  written_.wait(lock, [this] { return !pending_ && !writing_; });
}

void BackgroundIndex::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return pending_ || stopping_; });
    if (!pending_) {
      return;  // stopping, and everything is written
    }
    auto text = std::move(*pending_);
    pending_.reset();
    writing_ = true;
    lock.unlock();
    try {
      write_file_atomically(file_, text);
    } catch (const std::exception& error) {
      // A catalogue only; the next commit rewrites it.
      spdlog::warn("index {}: {}", file_.string(), error.what());
    }
    lock.lock();
    writing_ = false;
    written_.notify_all();
  }
}

}  // namespace epochrun
