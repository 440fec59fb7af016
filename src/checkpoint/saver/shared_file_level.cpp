#include "shared_file_level.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "mpi_thread_level.hpp"
#include "step_times.hpp"

namespace epochrun {

SharedFileLevel::SharedFileLevel(std::string job, const Communicator& comm,
                                 const CheckpointOptions& options,
                                 std::vector<std::string> node_names)
    : job_(std::move(job)), comm_(comm), options_(options), node_names_(std::move(node_names)) {
  const bool later = !options_.checkpoint_dir.empty() &&
                     (options_.async_checkpoint || !options_.local_dir.empty());
  // Agreed: every rank seals where the others do.
  if (later && comm_.allreduce_max(mpi_calls_from_any_thread() ? 0.0 : 1.0) == 0.0) {
    background_comm_ = comm_.duplicate();
  }
}

SharedFileLevel::~SharedFileLevel() {
  if (writer_.joinable()) {
    writer_.join();
  }
}

std::optional<std::vector<SavedBlob>> SharedFileLevel::begin(std::int64_t epoch,
                                                             std::vector<SavedBlob> blobs,
                                                             const SaveRoute& route,
                                                             SaveOutcome& outcome) {
  const auto& on = route.later && background_comm_ ? *background_comm_ : comm_;
  save_.emplace(DirectorySave::begin(CheckpointDirectory(options_.checkpoint_dir), on,
                                     SavedFile{epoch, job_, node_names_, options_.config_json},
                                     std::move(blobs), options_.save_timeout, options_.arrays,
                                     options_.check_replicated));
  note_array_paths(outcome);
  return std::vector<SavedBlob>{};
}

void SharedFileLevel::finish(bool later) {
  if (later) {
    writer_ = std::thread([this, seal = background_comm_.has_value()] {
      save_->write_data();
      if (seal) {
        save_->seal();
      }
    });
    return;
  }
  const auto writing = std::chrono::steady_clock::now();
  save_->write_data();
  step_times::add_since("write data", writing);
}

void SharedFileLevel::commit(SaveOutcome& outcome) {
  if (writer_.joinable()) {
    writer_.join();
  }
  stats_ = save_->commit();
  outcome.phases += save_->phases();
}

void SharedFileLevel::done(bool /*committed*/) {
  save_.reset();
}

void SharedFileLevel::note_array_paths(SaveOutcome& outcome) {
  outcome.array_paths = save_->array_paths();
  if (!comm_.is_root() || outcome.array_paths.empty() ||
      outcome.array_paths == logged_array_paths_) {
    return;
  }
  std::vector<std::string> paths;
  for (const auto& [name, path] : outcome.array_paths) {
    paths.push_back(fmt::format("'{}' {}", name, array_path_name(path)));
  }
  spdlog::info(
      "global arrays written {} (--array-io {}; direct: each rank writes its band of whole rows "
      "itself, with direct I/O; mpiio: one collective MPI-IO write)",
      fmt::join(paths, ", "), array_io_name(options_.arrays.path));
  const bool collective =
      std::any_of(outcome.array_paths.begin(), outcome.array_paths.end(),
                  [](const auto& path) { return path.second == ArrayPath::kMpiIo; });
  if (collective && options_.async_checkpoint) {
    // Measured (docs/benchmarks.md, "Inside a job"): the background thread's collective write
    // copies every byte through the page cache on the job's CPUs, and the job paid as much as a
    // synchronous save, or more.
    spdlog::info(
        "an asynchronous save of a global array by collective MPI-IO takes the job's CPUs for "
        "its copies into the page cache, and may cost the job more than a synchronous one: "
        "without --async-checkpoint the save waits for the disk instead");
  }
  logged_array_paths_ = outcome.array_paths;
}

}  // namespace epochrun
