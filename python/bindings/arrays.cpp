#include "arrays.hpp"

#include <bit>
#include <cstring>
#include <optional>
#include <vector>

namespace epochrun::python {
namespace {

const py::module_& numpy() {
  // Held for the life of the process: a module object destroyed after the interpreter would be a
  // crash at exit.
  static const auto* module = new py::module_(py::module_::import("numpy"));
  return *module;
}

std::vector<py::ssize_t> dimensions(const Shape& shape) {
  return {shape.begin(), shape.end()};
}

std::vector<py::ssize_t> row_major_strides(const Shape& shape, std::size_t element_size) {
  std::vector<py::ssize_t> strides(shape.size());
  auto stride = static_cast<py::ssize_t>(element_size);
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= static_cast<py::ssize_t>(shape[d]);
  }
  return strides;
}

bool same_shape(const py::array& array, const Shape& shape) {
  if (static_cast<std::size_t>(array.ndim()) != shape.size()) {
    return false;
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<std::uint64_t>(array.shape(static_cast<py::ssize_t>(d))) != shape[d]) {
      return false;
    }
  }
  return true;
}

// Where a zero-length array points: numpy needs an address, and one that is not null keeps
// pybind11 from allocating memory of its own for it.
std::byte empty_storage;

// A Python number, bool or list: a value numpy gives a dtype of its own choosing.
bool is_plain_python_value(py::handle value) {
  return PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyList_Check(value.ptr()) ||
         PyTuple_Check(value.ptr());
}

// Whether `array`'s elements are those of a blob of `dtype` (opaque bytes: uint8).
bool holds_elements_of(const py::array& array, DType dtype) {
  const auto found = element_dtype(array.dtype());
  return found && (*found == dtype || (dtype == DType::kBytes && *found == DType::kU8));
}

std::string described(const py::array& array) {
  return dtype_name(array.dtype()) + " of shape " + shape_text(array);
}

// `value` as an array of `dtype` and `shape` without a copy (a Python value is converted),
// UsageError naming `what` when it is not one.
py::array matching_array(py::handle value, DType dtype, const Shape& shape,
                         const std::string& what) {
  const auto target = numpy_dtype(dtype);
  const std::string holds =
      what + " holds " + dtype_name(target) + " of shape " + shape_text(shape);
  py::array array;
  if (is_plain_python_value(value)) {
    py::array as_read = numpy().attr("asarray")(value);
    if (!numpy().attr("can_cast")(as_read.dtype(), target, "same_kind").cast<bool>()) {
      auto text = std::string(py::repr(value));
      if (text.size() > 40) {
        text = text.substr(0, 37) + "...";
      }
      throw UsageError(holds + "; the value assigned, " + text + ", is " + described(as_read) +
                       ", which does not convert to it without changing its kind");
    }
    array = numpy().attr("asarray")(value, target);
  } else {
    try {
      array = numpy().attr("asarray")(value);
    } catch (py::error_already_set&) {
      throw UsageError(holds + "; the value assigned (" +
                       std::string(py::str(py::type::of(value).attr("__name__"))) +
                       ") is not an array");
    }
    if (!holds_elements_of(array, dtype)) {
      throw UsageError(holds + "; the value assigned is " + described(array) +
                       " (convert it with .astype(numpy." + dtype_name(target) + "))");
    }
  }
  if (!same_shape(array, shape)) {
    throw UsageError(holds + "; the value assigned is " + described(array));
  }
  if (!(array.flags() & py::array::c_style)) {
    throw UsageError(what +
                     ": the array assigned is not C-contiguous (numpy.ascontiguousarray(value) "
                     "makes a contiguous copy)");
  }
  return array;
}

void copy_into(Blob& blob, py::handle value, const std::string& what) {
  const auto array = matching_array(value, blob.dtype(), blob.shape(), what);
  if (blob.byte_size() != 0) {
    // memmove: `ctx["x"] += 1` assigns a blob's own array back to it.
    std::memmove(blob.raw().data(), array.data(), blob.byte_size());
  }
}

}  // namespace

py::dtype numpy_dtype(DType dtype) {
  return with_element_type(dtype, [](auto element) {
    using T = decltype(element);
    if constexpr (std::is_same_v<T, std::byte>) {
      return py::dtype::of<std::uint8_t>();
    } else {
      return py::dtype::of<T>();
    }
  });
}

std::optional<DType> element_dtype(const py::dtype& dtype) {
  const char order = dtype.byteorder();
  const bool native = order == '=' || order == '|' ||
                      order == (std::endian::native == std::endian::little ? '<' : '>');
  if (!native) {
    return std::nullopt;
  }
  const auto size = dtype.itemsize();
  switch (dtype.kind()) {
    case 'f':
      return size == 4   ? std::optional(DType::kF32)
             : size == 8 ? std::optional(DType::kF64)
                         : std::nullopt;
    case 'i':
      return size == 4   ? std::optional(DType::kI32)
             : size == 8 ? std::optional(DType::kI64)
                         : std::nullopt;
    case 'u':
      return size == 1 ? std::optional(DType::kU8) : std::nullopt;
    default:
      break;
  }
  return std::nullopt;
}

DType dtype_of(const py::dtype& dtype, const std::string& what) {
  if (const auto found = element_dtype(dtype)) {
    return *found;
  }
  throw UsageError(what + ": dtype " + dtype_name(dtype) +
                   " is not one epochrun holds (float32, float64, int32, int64, uint8)");
}

std::string dtype_name(const py::dtype& dtype) {
  return dtype.attr("name").cast<std::string>();
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    text += (d == 0 ? "" : ", ") + std::to_string(shape[d]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string shape_text(const py::array& array) {
  Shape shape;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    shape.push_back(static_cast<std::uint64_t>(array.shape(d)));
  }
  return shape_text(shape);
}

DType checked_array(const py::array& array, const std::string& what, bool read_only) {
  const auto dtype = dtype_of(array.dtype(), what);
  if (!(array.flags() & py::array::c_style)) {
    throw UsageError(what +
                     ": the array is not C-contiguous (numpy.ascontiguousarray(value) makes a "
                     "contiguous copy)");
  }
  if (!read_only && !array.writeable()) {
    throw UsageError(what + ": the array is read-only");
  }
  return dtype;
}

py::object BoundWorkspace::array(const std::string& name, py::handle self, bool read_only) {
  const auto& blob = workspace_.get(name);
  const auto* data = blob.raw().data();
  auto found = views_.find(name);
  if (!read_only && found != views_.end()) {
    // The cached array stands while the blob's storage is the same and no task changed the
    // array object itself (its shape, dtype or flags can be set in place).
    const auto& view = found->second;
    const auto& array = view.array;
    if (view.data == data && view.bytes == blob.byte_size() && view.dtype == blob.dtype() &&
        view.shape == blob.shape() && array.data() == static_cast<const void*>(data) &&
        array.writeable() && same_shape(array, blob.shape()) &&
        (array.flags() & py::array::c_style) && holds_elements_of(array, blob.dtype())) {
      return view.array;
    }
  }
  const void* address = data != nullptr ? static_cast<const void*>(data) : &empty_storage;
  py::array array(numpy_dtype(blob.dtype()), dimensions(blob.shape()),
                  row_major_strides(blob.shape(), element_size(blob.dtype())), address, self);
  if (read_only) {
    array.attr("setflags")(py::arg("write") = false);
    return array;
  }
  auto& view = views_[name];
  view = View{data, blob.byte_size(), blob.dtype(), blob.shape(), array};
  return view.array;
}

void BoundWorkspace::assign(const std::string& name, py::handle value) {
  copy_into(workspace_.get(name), value, "blob '" + name + "'");
}

py::array copy_of(const Blob& blob) {
  py::array array(numpy_dtype(blob.dtype()), dimensions(blob.shape()));
  if (blob.byte_size() != 0) {
    std::memcpy(array.mutable_data(), blob.raw().data(), blob.byte_size());
  }
  return array;
}

Blob blob_from(py::handle value, DType dtype, const Shape& shape, const std::string& what) {
  Blob blob(dtype, shape);
  copy_into(blob, value, what);
  return blob;
}

}  // namespace epochrun::python
