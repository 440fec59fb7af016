// A Blob: a named workspace value, an n-dimensional array of one DType.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "epochrun/dtype.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/export.hpp"

namespace epochrun {

using Shape = std::vector<std::uint64_t>;

// Number of elements a shape holds; an empty shape is a scalar (one element).
EPOCHRUN_API std::uint64_t element_count(const Shape& shape);
EPOCHRUN_API std::string shape_to_string(const Shape& shape);

class EPOCHRUN_API Blob {
 public:
  Blob() : Blob(DType::kU8, Shape{0}) {}
  // Zero-filled.
  Blob(DType dtype, Shape shape);
  Blob(const Blob& other);
  Blob& operator=(const Blob& other);
  // A moved-from blob holds no bytes.
  Blob(Blob&& other) noexcept;
  Blob& operator=(Blob&& other) noexcept;
  ~Blob();

  template <typename T>
  static Blob of(Shape shape, std::span<const T> values) {
    Blob blob(DTypeOf<T>::value, std::move(shape));
    auto out = blob.as<T>();
    if (out.size() != values.size()) {
      throw UsageError("Blob::of: " + std::to_string(values.size()) + " values for shape " +
                       shape_to_string(blob.shape()));
    }
    std::copy(values.begin(), values.end(), out.begin());
    return blob;
  }
  template <typename T>
  static Blob scalar(T value) {
    return of<T>(Shape{}, std::span<const T>(&value, 1));
  }
  static Blob bytes(std::span<const std::byte> data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::uint64_t size() const { return element_count(shape_); }
  std::size_t byte_size() const { return byte_size_; }

  std::span<std::byte> raw() { return {data_, byte_size_}; }
  std::span<const std::byte> raw() const { return {data_, byte_size_}; }

  // Typed views; throw UsageError when T does not match the blob's dtype.
  template <typename T>
  std::span<T> as() {
    check_dtype(DTypeOf<T>::value);
    return {reinterpret_cast<T*>(data_), byte_size_ / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    check_dtype(DTypeOf<T>::value);
    return {reinterpret_cast<const T*>(data_), byte_size_ / sizeof(T)};
  }
  // The single element of a scalar or one-element blob.
  template <typename T>
  T& item() {
    auto values = as<T>();
    check_single_element();
    return values[0];
  }
  template <typename T>
  T item() const {
    auto values = as<T>();
    check_single_element();
    return values[0];
  }

  // Same dtype, shape and bytes.
  friend bool operator==(const Blob& a, const Blob& b);

 private:
  void check_dtype(DType wanted) const;
  void check_single_element() const;

  DType dtype_;
  Shape shape_;
  // Raw little-endian element bytes. Stored as bytes so that one Blob type covers every dtype.
  // Owned; allocated zeroed but untouched (src/base/blob.cpp), so that a blob a load is about to
  // overwrite costs no zero-fill pass over its memory. From 1 MiB on it starts on a page
  // boundary, so that a save can write it to the disk with direct I/O.
  std::byte* data_ = nullptr;
  std::size_t byte_size_ = 0;
};

EPOCHRUN_API bool operator==(const Blob& a, const Blob& b);

}  // namespace epochrun
