#include "epochrun/dtype.hpp"

#include <array>
#include <utility>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 6> kDTypes{{
    {DType::kF32, "f32", 4},
    {DType::kF64, "f64", 8},
    {DType::kI32, "i32", 4},
    {DType::kI64, "i64", 8},
    {DType::kU8, "u8", 1},
    {DType::kBytes, "bytes", 1},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) {
      return entry;
    }
  }
  throw Error("unknown dtype code " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

std::size_t element_size(DType dtype) {
  return info(dtype).size;
}

std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}

DType parse_dtype(std::string_view name) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) {
      return entry.dtype;
    }
  }
  throw UsageError("unknown dtype '" + std::string(name) +
                   "' (expected f32, f64, i32, i64, u8 or bytes)");
}

}  // namespace epochrun
