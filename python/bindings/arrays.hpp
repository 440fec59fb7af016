// Blobs as numpy arrays over the workspace's own memory, and numpy arrays checked against what
// a blob or a collective takes: the one place the bindings turn numpy's types into epochrun's.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "epochrun/dtype.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun::python {

namespace py = pybind11;

// Calls `f(T{})` with T the C++ element type of `dtype` (std::byte for opaque bytes).
template <typename F>
decltype(auto) with_element_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kI32:
      return f(std::int32_t{});
    case DType::kI64:
      return f(std::int64_t{});
    case DType::kU8:
      return f(std::uint8_t{});
    case DType::kBytes:
      return f(std::byte{});
  }
  throw UsageError("unknown dtype");
}

// The numpy dtype of a blob's elements: opaque bytes are uint8 (what numpy reads them as).
py::dtype numpy_dtype(DType dtype);
// The DType of a numpy dtype (float32, float64, int32, int64, uint8 in native byte order), or
// nothing.
std::optional<DType> element_dtype(const py::dtype& dtype);
// The DType of a numpy dtype: float32, float64, int32, int64, uint8 in native byte order;
// UsageError naming `what` and the dtype otherwise.
DType dtype_of(const py::dtype& dtype, const std::string& what);
// "float64": a dtype as numpy names it.
std::string dtype_name(const py::dtype& dtype);
// "(3, 4)", "()": a shape as numpy prints it.
std::string shape_text(const Shape& shape);
std::string shape_text(const py::array& array);

// `array` as a C-contiguous, writeable (unless `read_only`) array of a blob dtype; UsageError
// naming `what` when it is not one. No copy: collectives and assignments work on its memory.
DType checked_array(const py::array& array, const std::string& what, bool read_only);

// A workspace whose blobs Python sees as numpy arrays over the blobs' memory. The arrays keep
// this object alive (their base), so an array kept after its run still points at live memory.
class BoundWorkspace {
 public:
  Workspace& workspace() { return workspace_; }

  // The blob `name` as an array over its memory (`self` is this object's Python handle),
  // writeable unless `read_only`; the same array object as long as the blob's storage stays.
  py::object array(const std::string& name, py::handle self, bool read_only = false);
  // Copies `value` into the blob `name`: an array (or anything numpy reads without a copy, such
  // as a CPU tensor) must have the blob's dtype and shape and be C-contiguous; a Python number
  // or list is converted to the blob's dtype when numpy can do so without losing its kind.
  // UsageError in one line otherwise.
  void assign(const std::string& name, py::handle value);
  // Whether Python holds the array of blob `name` handed out last (or a view of it, a tensor
  // over it) beyond this object's cache: its memory must then stay the blob's.
  bool held(const std::string& name) const {
    const auto found = views_.find(name);
    return found != views_.end() && found->second.array.ref_count() > 1;
  }
  // Forgets the cached arrays (they hold this object: the cycle is broken at a run's end).
  void release_views() { views_.clear(); }

 private:
  struct View {
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    DType dtype = DType::kU8;
    Shape shape;
    py::array array;
  };
  Workspace workspace_;
  std::map<std::string, View, std::less<>> views_;
};

// A new array holding a copy of `blob`.
py::array copy_of(const Blob& blob);
// The Blob of `dtype` and `shape` holding `value` (checked as BoundWorkspace::assign checks).
Blob blob_from(py::handle value, DType dtype, const Shape& shape, const std::string& what);

}  // namespace epochrun::python
