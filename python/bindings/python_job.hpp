// A job declared in Python (epochrun.Job) run by epochrun's runner: the C++ Job is built from the
// declaration once the command line is parsed, its tasks, stop conditions and rules call the
// Python callables with the GIL held, and everything else -- the parse, the saves, the loads, the
// agreements -- runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace epochrun::python {

namespace py = pybind11;

// Defines epochrun._core.Workspace, TaskContext, Blobs, RunSummary, run() and the helpers.
void define_runner(py::module_& module);

}  // namespace epochrun::python
