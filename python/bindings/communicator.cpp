#include "communicator.hpp"

#include <mpi4py/mpi4py.h>
#include <pybind11/numpy.h>

#include <optional>
#include <span>
#include <string>

#include "arrays.hpp"
#include "epochrun/errors.hpp"

namespace epochrun::python {
namespace {

// mpi4py's C API, imported on first use: epochrun runs without mpi4py, and importing it starts
// MPI where nothing else has.
void import_mpi4py_api() {
  static bool imported = false;
  if (!imported) {
    if (import_mpi4py() < 0) {
      PyErr_Clear();
      throw UsageError("mpi4py is not installed (Debian: python3-mpi4py)");
    }
    imported = true;
  }
}

Reduction reduction(const std::string& op) {
  if (op == "sum") {
    return Reduction::kSum;
  }
  if (op == "max") {
    return Reduction::kMax;
  }
  if (op == "min") {
    return Reduction::kMin;
  }
  throw UsageError("allreduce: op '" + op + "' is not sum, max or min");
}

// A Python number or list as a new array: what a collective over it works on.
py::array array_of_value(py::handle value) {
  return py::module_::import("numpy").attr("array")(value);
}

// Calls f(std::span<T>) over `array`'s elements (a checked array of a reducible dtype).
template <typename F>
void over_elements(const py::array& array, DType dtype, F&& f) {
  with_element_type(dtype, [&](auto element) {
    using T = decltype(element);
    if constexpr (!std::is_same_v<T, std::byte>) {
      f(std::span<T>(static_cast<T*>(const_cast<void*>(array.data())),
                     static_cast<std::size_t>(array.size())));
    }
  });
}

class PyCommunicator {
 public:
  explicit PyCommunicator(Communicator comm) : comm_(std::move(comm)) {}

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  void barrier() const {
    py::gil_scoped_release release;
    comm_.barrier();
  }

  // In place for an array (returned); a new value for a number or a list.
  py::object allreduce(py::handle values, const std::string& op) const {
    const auto how = reduction(op);
    const bool in_place = py::isinstance<py::array>(values);
    py::array array = in_place ? py::reinterpret_borrow<py::array>(values) : array_of_value(values);
    const auto dtype = checked_array(array, "allreduce", false);
    over_elements(array, dtype, [&](auto span) {
      py::gil_scoped_release release;
      comm_.allreduce(span, how);
    });
    if (in_place) {
      return array;
    }
    return array.ndim() == 0 ? array[py::tuple()] : py::object(std::move(array));
  }

  py::object broadcast(py::handle values, int root) const {
    const bool in_place = py::isinstance<py::array>(values);
    py::array array = in_place ? py::reinterpret_borrow<py::array>(values) : array_of_value(values);
    const auto dtype = checked_array(array, "broadcast", false);
    over_elements(array, dtype, [&](auto span) {
      py::gil_scoped_release release;
      comm_.broadcast(span, root);
    });
    if (in_place) {
      return array;
    }
    return array.ndim() == 0 ? array[py::tuple()] : py::object(std::move(array));
  }

  // Every rank's elements (any number per rank), flat, in rank order.
  py::list allgather(const py::array& array) const { return gathered(array, std::nullopt); }
  // The same on `root` only; an empty list elsewhere.
  py::list gather(const py::array& array, int root) const { return gathered(array, root); }

  void sendrecv(const py::array& send, int destination, const py::array& receive, int source,
                int tag) const {
    const auto send_type = checked_array(send, "sendrecv (send)", true);
    const auto receive_type = checked_array(receive, "sendrecv (receive)", false);
    if (send_type != receive_type) {
      throw UsageError("sendrecv: the send and receive arrays differ in dtype");
    }
    over_elements(receive, receive_type, [&](auto into) {
      using T = typename decltype(into)::element_type;
      std::span<const T> out(static_cast<const T*>(send.data()),
                             static_cast<std::size_t>(send.size()));
      py::gil_scoped_release release;
      comm_.sendrecv(out, destination, into, source, tag);
    });
  }

  // The same communicator as an mpi4py one (no duplicate: it shares the MPI communicator, which
  // stays epochrun's to free), for code that already speaks mpi4py.
  py::object mpi4py() const {
    import_mpi4py_api();
    auto comm = py::reinterpret_steal<py::object>(PyMPIComm_New(comm_.raw()));
    if (!comm) {
      throw py::error_already_set();
    }
    return py::module_::import("mpi4py.MPI").attr("Intracomm")(comm);
  }

  const Communicator& comm() const { return comm_; }

 private:
  py::list gathered(const py::array& array, std::optional<int> root) const {
    const auto dtype = checked_array(array, root ? "gather" : "allgather", true);
    py::list result;
    with_element_type(dtype, [&](auto element) {
      using T = decltype(element);
      if constexpr (!std::is_same_v<T, std::byte>) {
        std::span<const T> values(static_cast<const T*>(array.data()),
                                  static_cast<std::size_t>(array.size()));
        std::vector<std::vector<T>> parts;
        {
          py::gil_scoped_release release;
          parts = root ? comm_.gather(values, *root) : comm_.allgather(values);
        }
        for (const auto& part : parts) {
          py::array_t<T> out(static_cast<py::ssize_t>(part.size()));
          std::copy(part.begin(), part.end(), out.mutable_data());
          result.append(std::move(out));
        }
      }
    });
    return result;
  }

  Communicator comm_;
};

}  // namespace

MPI_Comm mpi_comm_of(py::handle comm) {
  import_mpi4py_api();
  MPI_Comm* handle = PyMPIComm_Get(comm.ptr());
  if (handle == nullptr) {
    PyErr_Clear();
    throw UsageError("comm must be an mpi4py communicator (mpi4py.MPI.Comm), not " +
                     std::string(py::str(py::type::of(comm).attr("__name__"))));
  }
  return *handle;
}

void define_communicator(py::module_& module) {
  py::class_<PyCommunicator>(module, "Communicator",
                             "A task's communicator: typed collectives over numpy arrays.")
      .def_property_readonly("rank", &PyCommunicator::rank)
      .def_property_readonly("size", &PyCommunicator::size)
      .def("barrier", &PyCommunicator::barrier)
      .def("allreduce", &PyCommunicator::allreduce, py::arg("values"), py::arg("op") = "sum",
           "Element-wise sum, max or min over the ranks: in place for an array (returned), a new "
           "value for a number.")
      .def("broadcast", &PyCommunicator::broadcast, py::arg("values"), py::arg("root") = 0,
           "Root's values on every rank: in place for an array (returned).")
      .def("allgather", &PyCommunicator::allgather, py::arg("array"),
           "Every rank's elements (any number per rank), flat, in rank order.")
      .def("gather", &PyCommunicator::gather, py::arg("array"), py::arg("root") = 0,
           "Every rank's elements on root (flat, in rank order); [] elsewhere.")
      .def("sendrecv", &PyCommunicator::sendrecv, py::arg("send"), py::arg("dest"),
           py::arg("receive"), py::arg("source"), py::arg("tag") = 0,
           "Sends to dest while receiving from source into `receive` (NO_RANK skips a side).")
      .def_property_readonly("mpi4py", &PyCommunicator::mpi4py,
                             "The same communicator as an mpi4py.MPI.Intracomm.")
      .attr("NO_RANK") = Communicator::kNoRank;
}

py::object make_communicator(const Communicator& comm) {
  return py::cast(PyCommunicator(comm));
}

}  // namespace epochrun::python
