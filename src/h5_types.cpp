#include "h5_types.hpp"

#include <vector>

#include "epochrun/errors.hpp"

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
      return Handle(H5Tcopy(H5T_STD_U8LE), "copy type");
    case DType::kBytes: {
      Handle type(H5Tcreate(H5T_OPAQUE, 1), "create opaque type");
      check(H5Tset_tag(type.get(), kBytesTag), "tag opaque type");
      return type;
    }
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
      return Handle(H5Tcopy(H5T_NATIVE_UINT8), "copy type");
    case DType::kBytes:
      return file_type_for(dtype);
  }
  throw Error("unknown dtype");
}

DType dtype_of(hid_t type, const std::string& what) {
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
      if (!is_signed && size == 1)
        return DType::kU8;
      break;
    }
    case H5T_OPAQUE:
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
