// The checkpoint manager for a loop of one's own (include/epochrun/checkpoint_manager.hpp) in
// Python: epochrun._core.CheckpointManager, whose arrays are numpy arrays over the manager's
// workspace, with the GIL released while it saves, loads and agrees.
#pragma once

#include <pybind11/pybind11.h>

namespace epochrun::python {

namespace py = pybind11;

// Defines epochrun._core.CheckpointManager and Restored.
void define_checkpoint_manager(py::module_& module);

}  // namespace epochrun::python
