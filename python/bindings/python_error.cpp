#include "python_error.hpp"

#include <chrono>
#include <ctime>
#include <exception>

#include "epochrun/errors.hpp"

namespace epochrun::python {
namespace {

int log_rank = -1;

// The class of epochrun.errors named `name`, held for the life of the process (a Python object
// destroyed after the interpreter would crash the exit).
py::handle python_class(const char* name) {
  return py::object(py::module_::import("epochrun.errors").attr(name)).release();
}

struct PythonClasses {
  py::handle error = python_class("Error");
  py::handle usage = python_class("UsageError");
  py::handle checkpoint = python_class("CheckpointError");
  py::handle not_found = python_class("CheckpointNotFound");
  py::handle corrupt = python_class("CorruptCheckpoint");
  py::handle mismatch = python_class("CheckpointMismatch");
};

const PythonClasses& classes() {
  static const auto* loaded = new PythonClasses();
  return *loaded;
}

// "[2026-11-28 10:00:00.123] [rank 1] [error] ", the log's own prefix (src/base/logging.cpp).
std::string log_prefix() {
  const auto now = std::chrono::system_clock::now();
  const auto seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  char prefix[128];
  std::snprintf(prefix, sizeof prefix, "[%s.%03d] [rank %d] [error] ", text,
                static_cast<int>(millis), log_rank);
  return prefix;
}

void write_traceback(const py::error_already_set& error, const std::string& where) {
  try {
    const auto lines = py::module_::import("traceback")
                           .attr("format_exception")(error.type(), error.value(), error.trace());
    std::string text = log_prefix() + where + " raised:\n";
    for (const auto& chunk : lines) {
      std::string part = py::str(chunk);
      std::size_t begin = 0;
      while (begin < part.size()) {
        const auto end = part.find('\n', begin);
        text += log_prefix() + part.substr(begin, end - begin) + "\n";
        begin = end == std::string::npos ? part.size() : end + 1;
      }
    }
    // Python's own stderr, so that it interleaves rightly with what the task printed there.
    auto err = py::module_::import("sys").attr("stderr");
    err.attr("write")(text);
    err.attr("flush")();
  } catch (py::error_already_set&) {
    // No traceback (stderr closed, say): the error line still reaches rank 0's log.
  }
}

std::string one_line(std::string text) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

}  // namespace

void set_log_rank(int rank) {
  log_rank = rank;
}

void register_error_translation() {
  classes();  // imported now, while the module is imported, not first inside a run
  py::register_exception_translator([](std::exception_ptr error) {
    const auto& python = classes();
    try {
      std::rethrow_exception(error);
    } catch (const UsageError& e) {
      PyErr_SetString(python.usage.ptr(), e.what());
    } catch (const CheckpointNotFound& e) {
      PyErr_SetString(python.not_found.ptr(), e.what());
    } catch (const CorruptCheckpoint& e) {
      PyErr_SetString(python.corrupt.ptr(), e.what());
    } catch (const CheckpointMismatch& e) {
      PyErr_SetString(python.mismatch.ptr(), e.what());
    } catch (const CheckpointError& e) {
      PyErr_SetString(python.checkpoint.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(python.error.ptr(), e.what());
    }
  });
}

void throw_python_error(const std::string& where) {
  py::error_already_set error;
  write_traceback(error, where);
  const auto& python = classes();
  const auto value = error.value();
  std::string message = one_line(std::string(py::str(py::type::of(value).attr("__name__"))) + ": " +
                                 std::string(py::str(value)));
  const auto is = [&](py::handle cls) { return PyObject_IsInstance(value.ptr(), cls.ptr()) == 1; };
  if (is(python.usage)) {
    throw UsageError(message);
  }
  if (is(python.not_found)) {
    throw CheckpointNotFound(message);
  }
  if (is(python.corrupt)) {
    throw CorruptCheckpoint(message);
  }
  if (is(python.mismatch)) {
    throw CheckpointMismatch(message);
  }
  if (is(python.checkpoint)) {
    throw CheckpointError(message);
  }
  throw Error(message);
}

}  // namespace epochrun::python
