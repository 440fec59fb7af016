#include "h5_types.hpp"

#include <vector>

#include "epochrun/errors.hpp"
#include "h5_attributes.hpp"

namespace epochrun::h5 {

Handle file_type_for(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Handle(H5Tcopy(H5T_IEEE_F32LE), "copy type");
    case DType::kF64:
      return Handle(H5Tcopy(H5T_IEEE_F64LE), "copy type");
    case DType::kI32:
      return Handle(H5Tcopy(H5T_STD_I32LE), "copy type");
    case DType::kI64:
      return Handle(H5Tcopy(H5T_STD_I64LE), "copy type");
    case DType::kU8:
    case DType::kBytes:
      return Handle(H5Tcopy(H5T_STD_U8LE), "copy type");
  }
  throw Error("unknown dtype");
}

Handle memory_type_for(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Handle(H5Tcopy(H5T_NATIVE_FLOAT), "copy type");
    case DType::kF64:
      return Handle(H5Tcopy(H5T_NATIVE_DOUBLE), "copy type");
    case DType::kI32:
      return Handle(H5Tcopy(H5T_NATIVE_INT32), "copy type");
    case DType::kI64:
      return Handle(H5Tcopy(H5T_NATIVE_INT64), "copy type");
    case DType::kU8:
    case DType::kBytes:
      return Handle(H5Tcopy(H5T_NATIVE_UINT8), "copy type");
  }
  throw Error("unknown dtype");
}

void mark_dtype(hid_t dataset, DType dtype) {
  if (dtype == DType::kBytes) {
    write_string_attribute(dataset, kDTypeAttr, kBytesMark);
  }
}

DType dtype_of(hid_t dataset, const std::string& what) {
  Handle stored(H5Dget_type(dataset), "get type of " + what);
  const hid_t type = stored.get();
  auto size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (size == 4)
        return DType::kF32;
      if (size == 8)
        return DType::kF64;
      break;
    case H5T_INTEGER: {
      bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if (is_signed && size == 4)
        return DType::kI32;
      if (is_signed && size == 8)
        return DType::kI64;
      if (!is_signed && size == 1) {
        if (H5Aexists(dataset, kDTypeAttr) <= 0) {
          H5Eclear2(H5E_DEFAULT);
          return DType::kU8;
        }
        // The mark is a short name; more than that is not one epochrun writes.
        const auto mark = read_string_attribute(dataset, kDTypeAttr, 64);
        if (mark != kBytesMark) {
          throw CorruptCheckpoint(what + " has an unknown " + kDTypeAttr + " '" + mark + "'");
        }
        return DType::kBytes;
      }
      break;
    }
    case H5T_OPAQUE:  // how version 1 checkpoints stored `bytes`
      if (size == 1)
        return DType::kBytes;
      break;
    default:
      break;
  }
  throw CorruptCheckpoint(what + " has a datatype epochrun does not store");
}

Handle dataspace_for(const Shape& shape) {
  if (shape.empty()) {
    return Handle(H5Screate(H5S_SCALAR), "create scalar space");
  }
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                "create dataspace");
}

}  // namespace epochrun::h5
