// A Blob: a named workspace value, an n-dimensional array of one DType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "epochrun/dtype.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {

using Shape = std::vector<std::uint64_t>;

namespace detail {
// Zeroed memory that is not touched when it is allocated (calloc: fresh pages from the kernel
// are zero already); freed with release. No transparent huge pages are asked for: on a virtual
// machine that reports free memory to its host, they made a load after a pause several times
// slower (docs/benchmarks.md, "Loads against the h5py peer").
void* allocate_zeroed(std::size_t bytes);
void release(void* memory) noexcept;

// A blob's storage allocator: a blob that a load is about to overwrite costs no zero-fill pass
// over its memory, only the page faults of fresh memory (on a virtual machine they can cost more
// than reading the bytes from the page cache).
template <typename T>
struct ZeroedAllocator {
  using value_type = T;
  ZeroedAllocator() = default;
  template <typename U>
  explicit ZeroedAllocator(const ZeroedAllocator<U>&) noexcept {}
  T* allocate(std::size_t count) { return static_cast<T*>(allocate_zeroed(count * sizeof(T))); }
  void deallocate(T* memory, std::size_t) noexcept { release(memory); }
  // Default-initialisation: the bytes are zero already.
  template <typename U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <typename U, typename... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const ZeroedAllocator&, const ZeroedAllocator&) = default;
};
}  // namespace detail

// Number of elements a shape holds; an empty shape is a scalar (one element).
std::uint64_t element_count(const Shape& shape);
std::string shape_to_string(const Shape& shape);

class Blob {
 public:
  Blob() : Blob(DType::kU8, Shape{0}) {}
  // Zero-filled.
  Blob(DType dtype, Shape shape);

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
  std::size_t byte_size() const { return data_.size(); }

  std::span<std::byte> raw() { return data_; }
  std::span<const std::byte> raw() const { return data_; }

  // Typed views; throw UsageError when T does not match the blob's dtype.
  template <typename T>
  std::span<T> as() {
    check_dtype(DTypeOf<T>::value);
    return {reinterpret_cast<T*>(data_.data()), data_.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    check_dtype(DTypeOf<T>::value);
    return {reinterpret_cast<const T*>(data_.data()), data_.size() / sizeof(T)};
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
  friend bool operator==(const Blob& a, const Blob& b) = default;

 private:
  void check_dtype(DType wanted) const;
  void check_single_element() const;

  DType dtype_;
  Shape shape_;
  // Raw little-endian element bytes. Stored as bytes so that one Blob type covers every dtype.
  std::vector<std::byte, detail::ZeroedAllocator<std::byte>> data_;
};

}  // namespace epochrun
