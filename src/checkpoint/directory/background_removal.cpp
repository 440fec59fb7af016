#include "background_removal.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
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
  std::error_code unknown;  // counted as 0 bytes
  const auto bytes = std::filesystem::file_size(file, unknown);
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(Retired{epoch, std::move(file), unknown ? 0 : bytes});
    pending_bytes_ += queue_.back().bytes;
  }
  wake_.notify_one();
}

std::uint64_t BackgroundRemoval::pending_bytes() const {
  const std::lock_guard lock(mutex_);
  return pending_bytes_;
}

void BackgroundRemoval::finish_pending() {
  std::unique_lock lock(mutex_);
  ++urgent_;
  wake_.notify_one();
  done_.wait(lock, [&] { return queue_.empty() && !deleting_; });
  --urgent_;
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
    std::deque<Retired> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock,
                 [&] { return stopping_ || (!queue_.empty() && (holds_ == 0 || urgent_ > 0)); });
      if (queue_.empty()) {
        return;  // stopping, and nothing left to delete
      }
      batch.swap(queue_);
      deleting_ = true;
    }
    std::uint64_t freed = 0;
    for (const auto& retired : batch) {
      try {
        fault_point("remove", retired.epoch);
        if (::unlink(retired.file.c_str()) != 0 && errno != ENOENT) {
          throw Error(errno_message("unlink"));
        }
      } catch (const std::exception& error) {
        // On this thread an escaping exception would end the process.
        spdlog::warn("could not delete {} (the retired checkpoint of epoch {}): {}",
                     retired.file.string(), retired.epoch, error.what());
      }
      freed += retired.bytes;
    }
    try {
      fsync_directory(directory_);
    } catch (const std::exception& error) {
      spdlog::warn("after deleting retired checkpoints: {}", error.what());
    }
    {
      const std::lock_guard lock(mutex_);
      pending_bytes_ -= freed;
      deleting_ = false;
    }
    done_.notify_all();
  }
}

}  // namespace epochrun
