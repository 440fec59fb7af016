// The communicator a Python task gets: epochrun's Communicator with its typed collectives over
// numpy arrays (in place, on the arrays' own memory, with the GIL released while MPI works), and
// the way to and from mpi4py's communicators.
#pragma once

#include <pybind11/pybind11.h>

#include "epochrun/communicator.hpp"

namespace epochrun::python {

namespace py = pybind11;

// Defines epochrun._core.Communicator.
void define_communicator(py::module_& module);

// `comm` as a Python epochrun._core.Communicator.
py::object make_communicator(const Communicator& comm);

// The MPI communicator of an mpi4py communicator (through mpi4py's C API); UsageError when
// `comm` is not one, or when mpi4py is not there.
MPI_Comm mpi_comm_of(py::handle comm);

}  // namespace epochrun::python
