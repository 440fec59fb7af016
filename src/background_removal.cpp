#include "background_removal.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "durable_file.hpp"
#include "fault_injection.hpp"

namespace epochrun {

BackgroundRemoval::BackgroundRemoval(std::filesystem::path directory)
    : directory_(std::move(directory)), worker_([this] { work(); }) {}

BackgroundRemoval::~BackgroundRemoval() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void BackgroundRemoval::remove(std::int64_t epoch, std::filesystem::path file) {
  {
    const std::lock_guard lock(mutex_);
    queue_.emplace_back(epoch, std::move(file));
  }
  wake_.notify_one();
}

BackgroundRemoval::Hold::Hold(BackgroundRemoval* removal) : removal_(removal) {
  if (removal_ != nullptr) {
    const std::lock_guard lock(removal_->mutex_);
    ++removal_->holds_;
  }
}

BackgroundRemoval::Hold::~Hold() {
  if (removal_ != nullptr) {
    {
      const std::lock_guard lock(removal_->mutex_);
      --removal_->holds_;
    }
    removal_->wake_.notify_one();
  }
}

void BackgroundRemoval::work() {
  for (;;) {
    std::deque<std::pair<std::int64_t, std::filesystem::path>> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (!queue_.empty() && holds_ == 0); });
      if (queue_.empty()) {
        return;  // stopping, and nothing left to delete
      }
      batch.swap(queue_);
    }
    for (const auto& [epoch, file] : batch) {
      fault_point("remove", epoch);
      if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
        spdlog::warn("could not delete {} (the retired checkpoint of epoch {}): {}", file.string(),
                     epoch, std::strerror(errno));
      }
    }
    try {
      fsync_directory(directory_);
    } catch (const std::exception& error) {
      spdlog::warn("after deleting retired checkpoints: {}", error.what());
    }
  }
}

}  // namespace epochrun
