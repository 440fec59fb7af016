#include "epochrun/blob.hpp"

#include <cstdlib>
#include <limits>

namespace epochrun {

namespace detail {

void* allocate_zeroed(std::size_t count) {
  void* memory = std::calloc(count, 1);
  if (memory == nullptr && count > 0) {
    throw std::bad_alloc();
  }
  return memory;
}

void release(void* memory) noexcept {
  std::free(memory);
}

}  // namespace detail

std::uint64_t element_count(const Shape& shape) {
  std::uint64_t count = 1;
  for (auto extent : shape) {
    if (extent != 0 && count > std::numeric_limits<std::uint64_t>::max() / extent) {
      throw UsageError("shape " + shape_to_string(shape) + " overflows 64 bits");
    }
    count *= extent;
  }
  return count;
}

std::string shape_to_string(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

Blob::Blob(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  data_.resize(element_count(shape_) * element_size(dtype_));
}

Blob Blob::bytes(std::span<const std::byte> data) {
  Blob blob(DType::kBytes, Shape{data.size()});
  std::copy(data.begin(), data.end(), blob.data_.begin());
  return blob;
}

void Blob::check_dtype(DType wanted) const {
  if (wanted != dtype_) {
    throw UsageError("blob holds " + std::string(dtype_name(dtype_)) + ", accessed as " +
                     std::string(dtype_name(wanted)));
  }
}

void Blob::check_single_element() const {
  if (size() != 1) {
    throw UsageError("blob of shape " + shape_to_string(shape_) + " is not a single element");
  }
}

}  // namespace epochrun
