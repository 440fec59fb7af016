#include "python_job.hpp"

#include <pybind11/stl.h>

#include <csignal>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "arrays.hpp"
#include "communicator.hpp"
#include "epochrun/epoch_limiter.hpp"
#include "epochrun/global_array.hpp"
#include "epochrun/job_registry.hpp"
#include "epochrun/mpi_session.hpp"
#include "epochrun/names.hpp"
#include "epochrun/run_main.hpp"
#include "python_error.hpp"

namespace epochrun::python {
namespace {

// A Python object that C++ may copy and drop on any thread (the std::functions of a Job are
// copied and destroyed where the GIL is not held): the last copy drops it with the GIL.
class PyRef {
 public:
  explicit PyRef(py::object object)
      : object_(new py::object(std::move(object)), [](py::object* held) {
          py::gil_scoped_acquire gil;
          delete held;
        }) {}
  PyObject* ptr() const { return object_->ptr(); }
  const py::object& get() const { return *object_; }

 private:
  std::shared_ptr<py::object> object_;
};

Shape shape_from(py::handle sequence) {
  Shape shape;
  for (auto item : sequence) {
    shape.push_back(item.cast<std::uint64_t>());
  }
  return shape;
}

py::tuple tuple_of(const Shape& shape) {
  py::tuple tuple(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    tuple[d] = shape[d];
  }
  return tuple;
}

}  // namespace

py::object python_block(const Block& block) {
  static const auto block_type =
      py::object(py::module_::import("epochrun.runner").attr("Block")).release();
  return block_type(tuple_of(block.start), tuple_of(block.count));
}

namespace {

// What tasks see during one epochrun.run() call.
struct ActiveRun;
ActiveRun* active = nullptr;

// The task context a Python task gets: its blobs as numpy arrays over the workspace, the
// epoch, the communicator, the job's options. One object serves every task of a run; it is
// bound to the runner's context only while a task runs.
class PyTaskContext {
 public:
  PyTaskContext(BoundWorkspace& workspace, py::object workspace_object, py::object options)
      : workspace_(&workspace),
        workspace_object_(std::move(workspace_object)),
        options_(std::move(options)) {}

  void bind(TaskContext* context) { context_ = context; }

  TaskContext& bound() const {
    if (context_ == nullptr) {
      throw UsageError(
          "the task context is used outside its task (keep what a task needs in blobs, or its "
          "arrays: they stay valid)");
    }
    return *context_;
  }

  py::object get(py::handle key) {
    bound();
    return workspace_->array(name_of(key), workspace_object_);
  }
  void set(py::handle key, py::handle value) {
    bound();
    workspace_->assign(name_of(key), value);
  }
  bool contains(py::handle key) const { return bound().workspace.has(name_of(key)); }
  std::vector<std::string> names() const { return bound().workspace.names(); }
  std::int64_t epoch() const { return bound().epoch; }
  const std::string& node_name() const { return bound().node_name; }
  int rank() const { return bound().comm.rank(); }
  int size() const { return bound().comm.size(); }
  py::object comm() {
    const auto& comm = bound().comm;
    if (!comm_object_ || comm_raw_ != comm.raw()) {
      comm_object_ = make_communicator(comm);
      comm_raw_ = comm.raw();
    }
    return comm_object_;
  }
  const py::object& options() const { return options_; }
  bool has_gathered() const { return bound().has_gathered(); }
  py::dict gathered(py::handle key) const {
    const auto name = name_of(key);
    py::dict values;
    for (const auto& [node, outputs] : bound().gathered_blobs()) {
      const auto found = outputs.find(name);
      if (found == outputs.end()) {
        throw UsageError("blob '" + name + "' was not gathered from " + node +
                         ": declare it with output=True");
      }
      values[py::str(node)] = copy_of(found->second);
    }
    return values;
  }
  py::object block(py::handle key) const;
  bool preemption_requested() const { return bound().preemption_requested(); }
  std::uintptr_t address(py::handle key) const {
    return reinterpret_cast<std::uintptr_t>(bound().workspace.get(name_of(key)).raw().data());
  }

  // A blob's name: a string, or a handle's `name`.
  static std::string name_of(py::handle key) {
    if (PyUnicode_Check(key.ptr())) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(key.ptr(), &size);
      if (text == nullptr) {
        throw py::error_already_set();
      }
      return {text, static_cast<std::size_t>(size)};
    }
    return py::str(key.attr("name"));
  }

 private:
  TaskContext* context_ = nullptr;
  BoundWorkspace* workspace_;
  py::object workspace_object_;
  py::object options_;
  py::object comm_object_;
  MPI_Comm comm_raw_ = MPI_COMM_NULL;
};

// The read-only view of a workspace that a stop condition gets.
class PyBlobs {
 public:
  PyBlobs(BoundWorkspace& workspace, py::object workspace_object)
      : workspace_(&workspace), workspace_object_(std::move(workspace_object)) {}

  void bind(const Workspace* workspace) { bound_ = workspace; }
  const Workspace& bound() const {
    if (bound_ == nullptr) {
      throw UsageError("the blobs of a stop condition are used outside it");
    }
    return *bound_;
  }
  py::object get(py::handle key) {
    const auto name = PyTaskContext::name_of(key);
    if (bound_ == &workspace_->workspace()) {
      return workspace_->array(name, workspace_object_, true);
    }
    return copy_of(bound().get(name));
  }
  bool contains(py::handle key) const { return bound().has(PyTaskContext::name_of(key)); }
  std::vector<std::string> names() const { return bound().names(); }

 private:
  BoundWorkspace* workspace_;
  py::object workspace_object_;
  const Workspace* bound_ = nullptr;
};

struct ActiveRun {
  std::string job_name;
  py::object job;  // the Python declaration
  py::object context_object;
  PyTaskContext* context = nullptr;
  py::object blobs_object;
  PyBlobs* blobs = nullptr;
  // The declared blobs of the Job built last, for TaskContext.block.
  std::map<std::string, BlobSpec> specs;
};

py::object PyTaskContext::block(py::handle key) const {
  const auto& context = bound();
  const auto name = name_of(key);
  const auto found = active->specs.find(name);
  if (found == active->specs.end() || found->second.kind != BlobKind::kGlobalArray) {
    throw UsageError("blob '" + name + "' is not a global array");
  }
  return python_block(found->second.block(context.comm.rank(), context.comm.size()));
}

// A Python task as a C++ one: the GIL only for the call, the context bound only for it, and a
// Python exception turned into the C++ error of its class (traceback in this rank's log).
TaskFunction python_task(PyRef run, std::string where) {
  return [run = std::move(run), where = std::move(where)](TaskContext& context) {
    py::gil_scoped_acquire gil;
    auto& state = *active;
    state.context->bind(&context);
    PyObject* result = PyObject_CallOneArg(run.ptr(), state.context_object.ptr());
    state.context->bind(nullptr);
    if (result == nullptr) {
      throw_python_error(where);
    }
    Py_DECREF(result);
  };
}

std::function<bool(const Workspace&)> python_condition(PyRef holds, std::string where) {
  return [holds = std::move(holds), where = std::move(where)](const Workspace& workspace) {
    py::gil_scoped_acquire gil;
    auto& state = *active;
    state.blobs->bind(&workspace);
    PyObject* result = PyObject_CallOneArg(holds.ptr(), state.blobs_object.ptr());
    state.blobs->bind(nullptr);
    if (result == nullptr) {
      throw_python_error(where);
    }
    const int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    if (truth < 0) {
      throw_python_error(where);
    }
    return truth == 1;
  };
}

// A global array's block rule in Python, asked once per (rank, rank count): the runner asks for
// blocks again and again, also from the save's own thread.
BlockRule python_block_rule(PyRef rule, std::string where) {
  struct Known {
    std::mutex mutex;
    std::map<std::pair<int, int>, Block> blocks;
  };
  auto known = std::make_shared<Known>();
  return [rule = std::move(rule), where = std::move(where), known](const Shape& shape, int rank,
                                                                   int ranks) {
    {
      const std::lock_guard lock(known->mutex);
      if (const auto found = known->blocks.find({rank, ranks}); found != known->blocks.end()) {
        return found->second;
      }
    }
    py::gil_scoped_acquire gil;
    Block block;
    try {
      const auto result = rule.get()(tuple_of(shape), rank, ranks);
      const auto parts = result.cast<py::sequence>();
      if (parts.size() != 2) {
        throw UsageError(where + " returned " + std::string(py::repr(result)) +
                         ", not (start, count)");
      }
      block = Block{shape_from(parts[0]), shape_from(parts[1])};
    } catch (py::error_already_set& error) {
      error.restore();
      throw_python_error(where);
    } catch (const py::cast_error&) {
      throw UsageError(where + " must return (start, count), each a sequence of integers");
    }
    const std::lock_guard lock(known->mutex);
    return known->blocks.emplace(std::pair(rank, ranks), block).first->second;
  };
}

RankChange python_rank_change(py::handle rule, DType dtype, const Shape& shape,
                              const std::string& name) {
  if (rule.is_none()) {
    return {};
  }
  if (py::isinstance<py::str>(rule)) {
    if (rule.cast<std::string>() == "recreate") {
      return RankChange::recreate();
    }
    throw UsageError("blob '" + name + "': on_rank_change is 'recreate' or a function, not '" +
                     rule.cast<std::string>() + "'");
  }
  const std::string where = "the on_rank_change rule of blob '" + name + "'";
  return RankChange::redistribute_with(
      [redistribute = PyRef(py::reinterpret_borrow<py::object>(rule)), dtype, shape, name, where](
          const std::vector<Blob>& old_values, int rank, int ranks) {
        py::gil_scoped_acquire gil;
        py::list values;
        for (const auto& value : old_values) {
          values.append(copy_of(value));
        }
        py::object result;
        try {
          result = redistribute.get()(values, rank, ranks);
        } catch (py::error_already_set& error) {
          error.restore();
          throw_python_error(where);
        }
        return blob_from(result, dtype, shape, "the value " + where + " returned");
      });
}

// Declares one blob of the resolved declaration (epochrun.runner._ResolvedBlob).
void declare_blob(Job& job, py::handle blob) {
  const auto name = blob.attr("name").cast<std::string>();
  const auto kind = blob.attr("kind").cast<std::string>();
  const auto code = blob.attr("dtype").cast<std::string>();
  const auto shape = shape_from(blob.attr("shape"));
  const py::object initial = blob.attr("initial");
  const auto dtype = parse_dtype(code);
  BlobUse use{blob.attr("output").cast<bool>(),
              python_rank_change(blob.attr("on_rank_change"), dtype, shape, name)};
  if (dtype == DType::kBytes) {
    if (kind == "replicated") {
      job.replicated<std::byte>(name, shape);
    } else {
      job.bytes(name, shape.at(0), use);
    }
    return;
  }
  with_element_type(dtype, [&](auto element) {
    using T = decltype(element);
    if constexpr (!std::is_same_v<T, std::byte>) {
      const T value = initial.is_none() ? T{} : initial.cast<T>();
      if (kind == "global_array") {
        const py::object rule = blob.attr("block_rule");
        job.global_array<T>(
            name, shape,
            rule.is_none() ? BlockRule{}
                           : python_block_rule(PyRef(rule), "the block rule of '" + name + "'"));
      } else if (kind == "replicated") {
        if (shape.empty()) {
          job.replicated_scalar<T>(name, value);
        } else {
          job.replicated<T>(name, shape);
        }
      } else if (shape.empty()) {
        job.scalar<T>(name, value, use);
      } else {
        job.blob<T>(name, shape, use);
      }
    }
  });
}

using OptionValue = std::variant<std::int64_t, double, std::string, bool>;

}  // namespace

Job declared_job(py::handle declaration, const py::dict& options) {
  const py::object resolved = declaration.attr("_resolve")(options);
  Job job(resolved.attr("name").cast<std::string>());
  for (auto blob : resolved.attr("blobs")) {
    declare_blob(job, blob);
  }
  const py::object limit = resolved.attr("epoch_limit");
  if (!limit.is_none()) {
    add_epoch_limiter(job, limit.cast<std::int64_t>());
  }
  const py::dict groups = resolved.attr("groups");
  for (auto* group : {&job.init_group, &job.epoch_group, &job.download_group, &job.exit_group}) {
    for (auto task : groups[py::str(group->name())]) {
      const auto task_name = task[py::int_(0)].cast<std::string>();
      group->add(task_name,
                 python_task(PyRef(py::reinterpret_borrow<py::object>(task[py::int_(1)])),
                             "task '" + task_name + "' of the " + group->name() + " group"));
    }
  }
  for (auto condition : resolved.attr("stop_conditions")) {
    const auto condition_name = condition[py::int_(0)].cast<std::string>();
    job.add_stop_condition(
        condition_name,
        python_condition(PyRef(py::reinterpret_borrow<py::object>(condition[py::int_(1)])),
                         "stop condition '" + condition_name + "'"));
  }
  for (auto key : resolved.attr("run_defining")) {
    job.declare_run_defining_option(key.cast<std::string>());
  }
  return job;
}

namespace {

// The C++ Job of the run's Python declaration, for the option values parsed.
Job build_job(const PyRef& declaration, const std::vector<std::string>& keys,
              const std::deque<OptionValue>& values) {
  py::dict options;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::visit([&](const auto& value) { options[py::str(keys[i])] = value; }, values[i]);
  }
  auto job = declared_job(declaration.get(), options);
  active->specs.clear();
  for (const auto& spec : job.expected_blobs()) {
    active->specs.emplace(spec.name, spec);
  }
  return job;
}

// The registry's entry for the Python job `name`: its options from the declaration of the run
// in progress, and the factory that builds it from their parsed values.
JobFactory declare_python_job(const std::string& name, JobOptions& options) {
  py::gil_scoped_acquire gil;
  if (active == nullptr || active->job_name != name) {
    throw UsageError("job '" + name + "' is a Python job that this run was not given");
  }
  auto keys = std::make_shared<std::vector<std::string>>();
  // A deque: the parser writes into each value through a pointer bound here.
  auto values = std::make_shared<std::deque<OptionValue>>();
  for (auto option : active->job.attr("_declared_options")()) {
    const auto key = option[py::int_(0)].cast<std::string>();
    const py::object value = option[py::int_(1)];
    const auto help = option[py::int_(2)].cast<std::string>();
    keys->push_back(key);
    if (PyBool_Check(value.ptr())) {
      options.add(key, &std::get<bool>(values->emplace_back(value.cast<bool>())), help);
    } else if (PyLong_Check(value.ptr())) {
      options.add(key, &std::get<std::int64_t>(values->emplace_back(value.cast<std::int64_t>())),
                  help);
    } else if (PyFloat_Check(value.ptr())) {
      options.add(key, &std::get<double>(values->emplace_back(value.cast<double>())), help);
    } else {
      options.add(key, &std::get<std::string>(values->emplace_back(value.cast<std::string>())),
                  help);
    }
  }
  return [declaration = PyRef(active->job), keys, values] {
    py::gil_scoped_acquire held;
    try {
      return build_job(declaration, *keys, *values);
    } catch (py::error_already_set& error) {
      error.restore();
      throw_python_error("the declaration of job '" + active->job_name + "'");
    }
  };
}

// Registers `name` once per process; later runs of a job of that name find the declaration of
// the run in progress.
void register_python_job(const std::string& name, const std::string& summary) {
  static std::set<std::string> registered;
  if (registered.contains(name)) {
    return;
  }
  if (JobRegistry::instance().find(name) != nullptr) {
    throw UsageError("a job named '" + name + "' is registered already");
  }
  JobRegistry::instance().add(
      {name, summary, [name](JobOptions& options) { return declare_python_job(name, options); }});
  registered.insert(name);
}

// MPI when the caller did not start it (no mpi4py communicator given): started at the first run
// or checkpoint manager and ended at the interpreter's exit (end_mpi), so that runs, managers
// and mpi4py can follow each other.
std::unique_ptr<MpiSession> session;

}  // namespace

Communicator world_starting_mpi() {
  int finalized = 0;
  if (MpiSession::is_initialized()) {
    MPI_Finalized(&finalized);
    if (finalized) {
      throw Error("MPI has already been ended in this process: start a new one to run a job");
    }
  } else {
    static int argc = 0;
    static char** argv = nullptr;
    session = std::make_unique<MpiSession>(argc, argv);
  }
  return Communicator::world();
}

namespace {

// Ctrl-C ends a rank as it ends a C++ job's (docs/PREEMPTION.md): while the runner runs, SIGINT
// has its default action rather than Python's handler, which would only raise
// KeyboardInterrupt once a task runs Python code again. Python's handler comes back afterwards,
// unless the run took SIGINT itself (--preempt-signals INT).
class DefaultSigint {
 public:
  DefaultSigint() {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &before_);
  }
  ~DefaultSigint() {
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    if (now.sa_handler == SIG_DFL) {
      sigaction(SIGINT, &before_, nullptr);
    }
  }
  DefaultSigint(const DefaultSigint&) = delete;
  DefaultSigint& operator=(const DefaultSigint&) = delete;

 private:
  struct sigaction before_ {};
};

struct PySummary {
  RunSummary summary;
};

py::tuple run_job(py::object job, std::vector<std::string> arguments, py::object workspace_object,
                  py::object comm) {
  if (active != nullptr) {
    throw UsageError("epochrun.run is running already in this process (a task cannot run a job)");
  }
  auto& workspace = workspace_object.cast<BoundWorkspace&>();
  std::optional<MPI_Comm> given;
  if (!comm.is_none()) {
    given = mpi_comm_of(comm);
  }
  const auto name = job.attr("name").cast<std::string>();
  register_python_job(name, job.attr("summary").cast<std::string>());

  ActiveRun run;
  run.job_name = name;
  run.job = job;
  run.context_object = py::cast(PyTaskContext(workspace, workspace_object, job.attr("options")));
  run.context = &run.context_object.cast<PyTaskContext&>();
  run.blobs_object = py::cast(PyBlobs(workspace, workspace_object));
  run.blobs = &run.blobs_object.cast<PyBlobs&>();
  active = &run;
  struct Inactive {
    ~Inactive() { active = nullptr; }
  } inactive;

  std::vector<char*> argv;
  for (auto& argument : arguments) {
    argv.push_back(argument.data());
  }
  argv.push_back(nullptr);
  CommandLineRun outcome;
  {
    const DefaultSigint sigint;
    py::gil_scoped_release release;
    outcome = run_from_command_line(
        static_cast<int>(arguments.size()), argv.data(), workspace.workspace(), [&] {
          auto chosen = given ? Communicator(*given) : world_starting_mpi();
          set_log_rank(chosen.rank());
          return chosen;
        });
  }
  py::object summary = py::none();
  if (outcome.summary) {
    summary = py::cast(PySummary{std::move(*outcome.summary)});
  }
  return py::make_tuple(outcome.exit_code, summary);
}

}  // namespace

void define_runner(py::module_& module) {
  py::class_<BoundWorkspace>(module, "Workspace", "A rank's blobs, seen as numpy arrays.")
      .def(py::init<>())
      .def("names", [](BoundWorkspace& self) { return self.workspace().names(); })
      .def(
          "array",
          [](py::object self, const std::string& name) {
            return self.cast<BoundWorkspace&>().array(name, self);
          },
          py::arg("name"))
      .def("_release_views", &BoundWorkspace::release_views);

  py::class_<PyTaskContext>(module, "TaskContext",
                            "What a task sees: its rank's blobs as numpy arrays over the "
                            "workspace, the epoch, the communicator and the job's options.")
      .def("__getitem__", &PyTaskContext::get, py::arg("blob"))
      .def("__setitem__", &PyTaskContext::set, py::arg("blob"), py::arg("value"))
      .def("__contains__", &PyTaskContext::contains, py::arg("blob"))
      .def("names", &PyTaskContext::names)
      .def_property_readonly("epoch", &PyTaskContext::epoch)
      .def_property_readonly("node_name", &PyTaskContext::node_name)
      .def_property_readonly("rank", &PyTaskContext::rank)
      .def_property_readonly("size", &PyTaskContext::size)
      .def_property_readonly("comm", &PyTaskContext::comm)
      .def_property_readonly("options", &PyTaskContext::options)
      .def("has_gathered", &PyTaskContext::has_gathered)
      .def("gathered", &PyTaskContext::gathered, py::arg("blob"))
      .def("block", &PyTaskContext::block, py::arg("blob"))
      .def("preemption_requested", &PyTaskContext::preemption_requested)
      .def("_address", &PyTaskContext::address, py::arg("blob"));

  py::class_<PyBlobs>(module, "Blobs", "A stop condition's read-only view of a rank's blobs.")
      .def("__getitem__", &PyBlobs::get, py::arg("blob"))
      .def("__contains__", &PyBlobs::contains, py::arg("blob"))
      .def("names", &PyBlobs::names);

  py::class_<PySummary>(module, "RunSummary", "A run's summary, as the runner returned it.")
      .def(
          "write_json",
          [](const PySummary& self, const std::string& file) {
            write_summary_json(self.summary, file);
          },
          py::arg("file"))
      .def("outputs", [](const PySummary& self) {
        py::dict outputs;
        for (const auto& [node, blobs] : self.summary.outputs) {
          py::dict values;
          for (const auto& [name, blob] : blobs) {
            values[py::str(name)] = copy_of(blob);
          }
          outputs[py::str(node)] = values;
        }
        return outputs;
      });

  module.def("run", &run_job, py::arg("job"), py::arg("arguments"), py::arg("workspace"),
             py::arg("comm"));
  module.def("_end_mpi", [] { session.reset(); });
  module.def(
      "_abort_mpi",
      [](int code) {
        int started = 0;
        int ended = 0;
        MPI_Initialized(&started);
        MPI_Finalized(&ended);
        if (started && !ended) {
          MPI_Abort(MPI_COMM_WORLD, code);
        }
      },
      py::arg("code"));
  module.def(
      "validate_name",
      [](const std::string& name, const std::string& what) { validate_name(name, what); },
      py::arg("name"), py::arg("what"));
  module.def(
      "balanced_block",
      [](const std::vector<std::uint64_t>& shape, int ranks, int rank) {
        return python_block(balanced_block(shape, ranks, rank));
      },
      py::arg("global_shape"), py::arg("ranks"), py::arg("rank"));
  module.def(
      "grid_block",
      [](const std::vector<std::uint64_t>& shape, const std::vector<int>& grid, int rank) {
        return python_block(grid_block(shape, grid, rank));
      },
      py::arg("global_shape"), py::arg("grid"), py::arg("rank"));
  module.def("process_grid", &process_grid, py::arg("ranks"), py::arg("dimensions"));
}

}  // namespace epochrun::python
