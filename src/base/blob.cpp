#include "epochrun/blob.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace epochrun {

namespace {

// Zeroed memory that is not touched when it is allocated (calloc: fresh pages from the kernel
// are zero already): a blob that a load is about to overwrite costs no zero-fill pass over its
// memory, only the page faults of fresh memory (on a virtual machine they can cost more than
// reading the bytes from the page cache). No transparent huge pages are asked for: on a virtual
// machine that reports free memory to its host, they made a load after a pause several times
// slower (docs/benchmarks-history.md, "Loads against the h5py peer"). Nothing for zero bytes.
//
// A blob of kPageAlignedFrom bytes or more starts on a page boundary, so that a save can hand
// its bytes to the disk with direct I/O (O_DIRECT asks for an aligned buffer), with no copy
// into the page cache: calloc's own pointer to such a block is 16 bytes past a page. It gets
// one page more than it asks for, starts at the first page boundary past calloc's pointer, and
// keeps that pointer in the word before it, for release. For a block calloc maps (every large
// one) that word lies in the page of malloc's own header, which calloc touched already: no
// page fault more, and the rest stays untouched.
constexpr std::size_t kPage = 4096;
constexpr std::size_t kPageAlignedFrom = std::size_t{1} << 20;

std::byte* allocate_zeroed(std::size_t count) {
  if (count == 0) {
    return nullptr;
  }
  if (count < kPageAlignedFrom) {
    void* memory = std::calloc(count, 1);
    if (memory == nullptr) {
      throw std::bad_alloc();
    }
    return static_cast<std::byte*>(memory);
  }
  if (count > std::numeric_limits<std::size_t>::max() - kPage) {
    throw std::bad_alloc();
  }
  void* memory = std::calloc(count + kPage, 1);
  if (memory == nullptr) {
    throw std::bad_alloc();
  }
  // calloc's pointer is aligned to 16 bytes at least, so the boundary past it leaves room for
  // the word (at least 16 bytes) and the blob (count bytes) within the block.
  const auto at = (reinterpret_cast<std::uintptr_t>(memory) + kPage) & ~std::uintptr_t{kPage - 1};
  auto* data = reinterpret_cast<std::byte*>(at);
  std::memcpy(data - sizeof(memory), &memory, sizeof(memory));
  return data;
}

// Gives back what allocate_zeroed(count) returned.
void release(std::byte* data, std::size_t count) noexcept {
  if (data == nullptr || count < kPageAlignedFrom) {
    std::free(data);
    return;
  }
  void* memory = nullptr;
  std::memcpy(&memory, data - sizeof(memory), sizeof(memory));
  std::free(memory);
}

}  // namespace

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

Blob::Blob(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      data_(allocate_zeroed(element_count(shape_) * element_size(dtype_))),
      byte_size_(element_count(shape_) * element_size(dtype_)) {}

Blob::Blob(const Blob& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      data_(allocate_zeroed(other.byte_size_)),
      byte_size_(other.byte_size_) {
  std::copy_n(other.data_, byte_size_, data_);
}

Blob& Blob::operator=(const Blob& other) {
  if (this != &other) {
    *this = Blob(other);
  }
  return *this;
}

Blob::Blob(Blob&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      data_(std::exchange(other.data_, nullptr)),
      byte_size_(std::exchange(other.byte_size_, 0)) {}

Blob& Blob::operator=(Blob&& other) noexcept {
  if (this != &other) {
    release(data_, byte_size_);
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    data_ = std::exchange(other.data_, nullptr);
    byte_size_ = std::exchange(other.byte_size_, 0);
  }
  return *this;
}

Blob::~Blob() {
  release(data_, byte_size_);
}

bool operator==(const Blob& a, const Blob& b) {
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ &&
         std::equal(a.data_, a.data_ + a.byte_size_, b.data_, b.data_ + b.byte_size_);
}

Blob Blob::bytes(std::span<const std::byte> data) {
  Blob blob(DType::kBytes, Shape{data.size()});
  std::copy(data.begin(), data.end(), blob.data_);
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
