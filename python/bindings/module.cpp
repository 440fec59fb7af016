// epochrun._core: the compiled half of the Python package's runner (python/epochrun/runner.py
// is the other), thin bindings over libepochrun's public API (include/epochrun/).
#include <pybind11/pybind11.h>

#include "checkpoint_manager.hpp"
#include "communicator.hpp"
#include "python_error.hpp"
#include "python_job.hpp"

PYBIND11_MODULE(_core, module) {
  module.doc() =
      "epochrun's runner for jobs written in Python (see epochrun.Job, epochrun.run) and its "
      "checkpoint manager (epochrun.CheckpointManager)";
  epochrun::python::register_error_translation();
  epochrun::python::define_communicator(module);
  epochrun::python::define_runner(module);
  epochrun::python::define_checkpoint_manager(module);
}
