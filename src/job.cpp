#include "epochrun/job.hpp"

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"

namespace epochrun {

void TaskGroup::add(std::string task_name, TaskFunction run) {
  tasks_.push_back(Task{std::move(task_name), std::move(run)});
}

void TaskGroup::run(TaskContext& context) const {
  for (const auto& task : tasks_) {
    try {
      if (&task == &tasks_.front()) {
        fault_point(name_ + "-task", context.epoch);
      }
      task.run(context);
    } catch (const std::exception& error) {
      // Keep the exit code of the original error class where it has one.
      const std::string where =
          "task '" + task.name + "' of the " + name_ + " group on " + context.node_name + ": ";
      if (dynamic_cast<const UsageError*>(&error)) {
        throw UsageError(where + error.what());
      }
      if (dynamic_cast<const CheckpointError*>(&error)) {
        throw CheckpointError(where + error.what());
      }
      throw Error(where + error.what());
    }
  }
}

Job::Job(std::string name) : name_(std::move(name)) {
  validate_name(name_, "job name");
}

std::string Job::node_name(int rank) {
  return "trainer_" + std::to_string(rank);
}

void Job::add_stop_condition(std::string condition_name,
                             std::function<bool(const Workspace&)> holds) {
  stop_conditions_.push_back(StopCondition{std::move(condition_name), std::move(holds)});
}

void Job::declare_output(std::string blob_name) {
  validate_name(blob_name, "output blob name");
  outputs_.push_back(std::move(blob_name));
}

void Job::declare_run_defining_option(std::string key) {
  run_defining_options_.push_back(std::move(key));
}

void Job::expect_blob(std::string blob_name, DType dtype, Shape shape) {
  validate_name(blob_name, "blob name");
  expected_blobs_.push_back(BlobSpec{std::move(blob_name), dtype, std::move(shape)});
}

}  // namespace epochrun
