// A job declared in Python (epochrun.Job) run by epochrun's runner: the C++ Job is built from the
// declaration once the command line is parsed, its tasks, stop conditions and rules call the
// Python callables with the GIL held, and everything else -- the parse, the saves, the loads, the
// agreements -- runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include "epochrun/communicator.hpp"
#include "epochrun/global_array.hpp"
#include "epochrun/job.hpp"

namespace epochrun::python {

namespace py = pybind11;

// The C++ Job of a Python declaration (epochrun.Job) for the job option values `options`: its
// blobs (block rules and rank-change rules calling the Python callables with the GIL), task
// groups, stop conditions and epoch limit.
Job declared_job(py::handle declaration, const py::dict& options);

// MPI_COMM_WORLD, MPI started here (MPI_THREAD_MULTIPLE) when nothing has started it; Error
// once it has been ended in this process.
Communicator world_starting_mpi();

// A global array's block as an epochrun.Block.
py::object python_block(const Block& block);

// Defines epochrun._core.Workspace, TaskContext, Blobs, RunSummary, run() and the helpers.
void define_runner(py::module_& module);

}  // namespace epochrun::python
