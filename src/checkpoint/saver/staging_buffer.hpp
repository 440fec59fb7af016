// The asynchronous saver's private copy of one blob: page-aligned, so that the background
// write can hand it to the disk with direct I/O (no copy into the page cache, no writeback
// work on the job's CPUs), and kept from one save to the next (same size: its pages are only
// touched again, not allocated).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>

#include "direct_io.hpp"

namespace epochrun {

class StagingBuffer {
 public:
  // Holds `size` bytes, reallocating only when the size changes.
  std::span<std::byte> resize(std::size_t size) {
    if (size != size_) {
      data_.reset();
      size_ = 0;
      if (size > 0) {
        const auto rounded =
            (size + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
        data_.reset(static_cast<std::byte*>(std::aligned_alloc(kDirectIoAlignment, rounded)));
        if (!data_) {
          throw std::bad_alloc();
        }
      }
      size_ = size;
    }
    return {data_.get(), size_};
  }

 private:
  struct Free {
    void operator()(std::byte* bytes) const { std::free(bytes); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace epochrun
