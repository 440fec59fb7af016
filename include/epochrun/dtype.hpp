// The element types a Blob can hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "epochrun/export.hpp"

namespace epochrun {

// `kBytes` is opaque data (optimizer state, serialized RNG state...): one byte per element,
// stored in HDF5 as H5T_OPAQUE so readers do not mistake it for numbers.
enum class DType : std::uint8_t { kF32, kF64, kI32, kI64, kU8, kBytes };

EPOCHRUN_API std::size_t element_size(DType dtype);
EPOCHRUN_API std::string_view dtype_name(DType dtype);
// Parses "f32", "f64", "i32", "i64", "u8", "bytes"; throws UsageError otherwise.
EPOCHRUN_API DType parse_dtype(std::string_view name);

// The DType of a C++ element type, for typed access to blob data.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::kU8;
};
template <>
struct DTypeOf<std::byte> {
  static constexpr DType value = DType::kBytes;
};

// A C++ type a blob can hold elements of.
template <typename T>
concept Element = requires {
  DTypeOf<T>::value;
};

}  // namespace epochrun
