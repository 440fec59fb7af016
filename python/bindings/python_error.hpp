// Errors across the boundary, both ways: epochrun's C++ error classes raise the Python classes of
// epochrun.errors (the same table: src/base/error_table.hpp), and a Python exception in a task, a
// stop condition or a rule becomes the C++ error of its class, so the runner agrees on it across
// the ranks and exits with that class's code.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace epochrun::python {

namespace py = pybind11;

// Registers the translation of epochrun's C++ exceptions into epochrun.errors' classes.
void register_error_translation();

// The rank whose log a traceback goes to (set once the run knows it; -1: none yet).
void set_log_rank(int rank);

// With the GIL held and a Python error set: writes its traceback to this rank's log (stderr, in
// the log's line format) and throws the C++ error of its class (epochrun.UsageError as
// UsageError, the checkpoint errors as theirs, any other exception as Error), whose message is
// one line: "<ExceptionClass>: <message>". `where` says what raised it ("task 'train'").
[[noreturn]] void throw_python_error(const std::string& where);

}  // namespace epochrun::python
