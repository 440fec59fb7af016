#include "checkpoint_manager.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "communicator.hpp"
#include "epochrun/checkpoint_manager.hpp"
#include "python_error.hpp"
#include "python_job.hpp"

namespace epochrun::python {
namespace {

// The run options of the manager's keyword arguments (epochrun.CheckpointManager passes only
// those given, by these names); the C++ manager checks their values.
RunOptions manager_options(const std::string& directory, const py::dict& given) {
  RunOptions options;
  options.checkpoint_dir = directory;
  for (const auto& [key_handle, value] : given) {
    const auto key = key_handle.cast<std::string>();
    if (key == "async_checkpoint") {
      options.async_checkpoint = value.cast<bool>();
    } else if (key == "max_staging_bytes") {
      options.async_max_staging_bytes = value.cast<std::uint64_t>();
    } else if (key == "local_dir") {
      options.local_dir = value.cast<std::string>();
    } else if (key == "flush_every") {
      options.flush_every = value.cast<std::int64_t>();
    } else if (key == "flush_interval") {
      options.flush_interval_seconds = value.cast<double>();
      if (!given.contains("flush_every")) {
        options.flush_every = 0;  // by time alone, as --flush-interval alone
      }
    } else if (key == "local_keep") {
      options.local_keep = value.cast<std::int64_t>();
    } else if (key == "local_redundancy") {
      options.local_redundancy = value.cast<std::string>();
    } else if (key == "keep_last") {
      options.retention.keep_last = value.cast<std::int64_t>();
    } else if (key == "keep_every") {
      options.retention.keep_every = value.cast<std::int64_t>();
    } else if (key == "array_io") {
      const auto io = parse_array_io(value.cast<std::string>());
      if (!io) {
        throw UsageError("array_io must be auto, direct or mpiio, got '" +
                         value.cast<std::string>() + "'");
      }
      options.array_io = *io;
    } else if (key == "mpi_io_hints") {
      options.mpi_io_hints = value.cast<std::map<std::string, std::string>>();
    } else if (key == "check_replicated") {
      options.check_replicated = value.cast<bool>();
    } else if (key == "directory_lock") {
      options.directory_lock = value.cast<bool>();
    } else if (key == "save_timeout") {
      options.save_timeout = std::chrono::duration<double>(value.cast<double>());
    } else if (key == "xdmf") {
      options.xdmf_file = value.cast<std::string>();
    } else if (key == "config_json") {
      options.config_json = value.cast<std::string>();
    } else {
      throw UsageError("the checkpoint manager has no option '" + key + "'");
    }
  }
  return options;
}

py::dict saved_dict(const SaveResult& result) {
  py::dict saved;
  saved["epoch"] = result.epoch;
  saved["committed"] = result.committed;
  saved["node_local"] = result.node_local;
  saved["in_background"] = result.in_background;
  saved["failure"] = result.failure;
  saved["seconds"] = result.seconds;
  saved["blocked_seconds"] = result.blocked_seconds;
  saved["bytes"] = result.bytes;
  return saved;
}

// epochrun._core.CheckpointManager: the C++ manager over a workspace whose blobs Python sees as
// numpy arrays. Arrays handed out stay valid and keep their memory through restores and
// create(): what those bring is copied into a blob whose array is held, and moved in otherwise.
class PyCheckpointManager {
 public:
  // Collective on `comm` (an mpi4py communicator, or None: MPI_COMM_WORLD). `declaration` is an
  // epochrun.Job whose blobs the checkpoints hold, for its job option values `values`.
  PyCheckpointManager(const py::object& declaration, const py::dict& values,
                      const std::string& directory, const py::object& comm, const py::dict& options,
                      py::object workspace_object)
      : workspace_object_(std::move(workspace_object)),
        workspace_(&workspace_object_.cast<BoundWorkspace&>()),
        job_(declared_job(declaration, values)),
        comm_(comm.is_none() ? world_starting_mpi() : Communicator(mpi_comm_of(comm))) {
    const auto run_options = manager_options(directory, options);
    set_log_rank(comm_.rank());
    py::gil_scoped_release release;
    manager_ = std::make_unique<CheckpointManager>(job_, comm_, run_options);
  }

  ~PyCheckpointManager() { close(); }
  PyCheckpointManager(const PyCheckpointManager&) = delete;
  PyCheckpointManager& operator=(const PyCheckpointManager&) = delete;

  void create() {
    Workspace created;
    manager().create(created);
    adopt(std::move(created));
  }

  std::optional<Restored> restore(const py::object& epoch) {
    const auto request =
        epoch.is_none() || (py::isinstance<py::str>(epoch) && epoch.cast<std::string>() == "latest")
            ? ResumeRequest::latest()
            : ResumeRequest::at(epoch.cast<std::int64_t>());
    if (request.kind == ResumeRequest::Kind::kEpoch && request.epoch < 0) {
      throw UsageError("restore takes an epoch of at least 0 or 'latest', got " +
                       std::to_string(request.epoch));
    }
    Workspace loaded;
    std::optional<Restored> restored;
    {
      py::gil_scoped_release release;
      restored = manager().restore(request, loaded);
    }
    adopt(std::move(loaded));
    return restored;
  }

  py::dict save(std::int64_t epoch, const py::object& arrays, bool last) {
    if (!arrays.is_none()) {
      for (const auto& [name, value] : arrays.cast<py::dict>()) {
        put(name.cast<std::string>(), value);
      }
    }
    SaveResult result;
    {
      py::gil_scoped_release release;
      result = manager().save(epoch, workspace_->workspace(), last);
    }
    return saved_dict(result);
  }

  std::optional<py::dict> wait() {
    std::optional<SaveResult> result;
    {
      py::gil_scoped_release release;
      result = manager().wait();
    }
    if (!result) {
      return std::nullopt;
    }
    return saved_dict(*result);
  }

  std::optional<std::int64_t> latest() {
    py::gil_scoped_release release;
    return manager().latest();
  }

  py::object block(const std::string& name) const {
    for (const auto& spec : job_.expected_blobs()) {
      if (spec.name == name && spec.kind == BlobKind::kGlobalArray) {
        return python_block(spec.block(comm_.rank(), comm_.size()));
      }
    }
    throw UsageError("blob '" + name + "' is not a global array");
  }

  py::object array(const std::string& name) { return workspace_->array(name, workspace_object_); }

  // `value` into the blob `name`: nothing when it is the blob's own array, else a checked copy.
  void put(const std::string& name, py::handle value) {
    auto& workspace = workspace_->workspace();
    if (!workspace.has(name)) {
      throw UsageError("blob '" + name + "' is not in the checkpoint manager's arrays (create() " +
                       "or restore() them first)");
    }
    if (py::isinstance<py::array>(value)) {
      const auto& given = py::reinterpret_borrow<py::array>(value);
      if (given.data() == static_cast<const void*>(workspace.get(name).raw().data()) &&
          given.nbytes() == static_cast<py::ssize_t>(workspace.get(name).byte_size())) {
        return;
      }
    }
    workspace_->assign(name, value);
  }

  // Collective: waits for the save in flight, commits it and releases the directory's lock.
  void close() {
    if (manager_) {
      py::gil_scoped_release release;
      manager_.reset();
    }
  }

  bool closed() const { return !manager_; }
  // The communicator the manager was opened on (not the manager's own duplicate), for the
  // loop's collectives.
  py::object comm() {
    if (!comm_object_) {
      comm_object_ = make_communicator(comm_);
    }
    return comm_object_;
  }

 private:
  CheckpointManager& manager() {
    if (!manager_) {
      throw UsageError("the checkpoint manager is closed");
    }
    return *manager_;
  }

  // The blobs of `incoming` into the workspace: copied into a blob of the same dtype and shape
  // whose array Python holds (its views and tensors see the new values), moved in otherwise. A
  // held blob that cannot take the new value keeps its memory for the arrays over it.
  void adopt(Workspace incoming) {
    auto& workspace = workspace_->workspace();
    for (const auto& name : incoming.names()) {
      auto& blob = incoming.get(name);
      if (workspace.has(name) && workspace_->held(name)) {
        auto& held = workspace.get(name);
        if (held.dtype() == blob.dtype() && held.shape() == blob.shape()) {
          if (blob.byte_size() != 0) {
            std::memcpy(held.raw().data(), blob.raw().data(), blob.byte_size());
          }
          continue;
        }
        retired_.push_back(std::move(held));
      }
      workspace.put(name, std::move(blob));
    }
  }

  py::object workspace_object_;
  BoundWorkspace* workspace_;
  Job job_;
  Communicator comm_;
  py::object comm_object_;
  std::unique_ptr<CheckpointManager> manager_;
  std::vector<Blob> retired_;  // the memory of arrays Python may still hold (adopt)
};

}  // namespace

void define_checkpoint_manager(py::module_& module) {
  py::class_<Restored>(module, "Restored", "What a restore loaded.")
      .def_readonly("epoch", &Restored::epoch)
      .def_readonly("written_by_ranks", &Restored::written_by_ranks)
      .def_readonly("node_local", &Restored::node_local)
      .def_readonly("arrays", &Restored::arrays)
      .def("__repr__", [](const Restored& self) {
        return "Restored(epoch=" + std::to_string(self.epoch) +
               ", written_by_ranks=" + std::to_string(self.written_by_ranks) +
               ", node_local=" + (self.node_local ? "True" : "False") + ")";
      });

  py::class_<PyCheckpointManager>(module, "CheckpointManager",
                                  "libepochrun's checkpoint manager (epochrun.CheckpointManager "
                                  "is its Python face).")
      .def(py::init<py::object, py::dict, std::string, py::object, py::dict, py::object>(),
           py::arg("declaration"), py::arg("values"), py::arg("directory"), py::arg("comm"),
           py::arg("options"), py::arg("workspace"))
      .def("create", &PyCheckpointManager::create)
      .def("restore", &PyCheckpointManager::restore, py::arg("epoch"))
      .def("save", &PyCheckpointManager::save, py::arg("epoch"), py::arg("arrays"), py::arg("last"))
      .def("wait", &PyCheckpointManager::wait)
      .def("latest", &PyCheckpointManager::latest)
      .def("block", &PyCheckpointManager::block, py::arg("name"))
      .def("array", &PyCheckpointManager::array, py::arg("name"))
      .def("put", &PyCheckpointManager::put, py::arg("name"), py::arg("value"))
      .def("close", &PyCheckpointManager::close)
      .def_property_readonly("closed", &PyCheckpointManager::closed)
      .def_property_readonly("comm", &PyCheckpointManager::comm);
}

}  // namespace epochrun::python
