#include "epochrun/job.hpp"

#include <algorithm>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "error_table.hpp"
#include "fault_injection.hpp"
#include "preemption_signals.hpp"

namespace epochrun {

void TaskGroup::add(std::string task_name, TaskFunction run) {
  tasks_.push_back(Task{std::move(task_name), std::move(run)});
}

void TaskGroup::add_first(std::string task_name, TaskFunction run) {
  tasks_.insert(tasks_.begin(), Task{std::move(task_name), std::move(run)});
}

void TaskGroup::run(TaskContext& context) const {
  for (const auto& task : tasks_) {
    try {
      if (&task == &tasks_.front()) {
        fault_point(name_ + "-task", context.epoch);
      }
      task.run(context);
    } catch (const std::exception& error) {
      // The same class (so the same exit code), with where it happened.
      throw_as(error_class_of(error), "task '" + task.name + "' of the " + name_ + " group on " +
                                          context.node_name + ": " + error.what());
    }
  }
}

bool TaskContext::preemption_requested() const {
  return PreemptionSignals::received() != 0;
}

const GatheredBlobs& TaskContext::gathered_blobs() const {
  if (downloaded == nullptr) {
    throw UsageError(
        "gathered outputs exist only on rank 0, in the download and exit groups "
        "(check has_gathered())");
  }
  return *downloaded;
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

void Job::declare_run_defining_option(std::string key) {
  run_defining_options_.push_back(std::move(key));
}

Block BlobSpec::block(int rank, int ranks) const {
  return block_rule ? block_rule(shape, rank, ranks) : balanced_block(shape, ranks, rank);
}

Shape BlobSpec::local_shape(int rank, int ranks) const {
  return kind == BlobKind::kGlobalArray ? block(rank, ranks).count : shape;
}

Blob BlobSpec::created(int rank, int ranks) const {
  Blob blob(dtype, local_shape(rank, ranks));
  std::copy(initial.begin(), initial.end(), blob.raw().begin());
  return blob;
}

const std::vector<BlobSpec>& Job::expected_blobs() const {
  static const std::vector<BlobSpec> none;
  return declared_ ? *declared_ : none;
}

const BlobSpec* Job::find_blob(const std::string& blob_name) const {
  for (const auto& expected : expected_blobs()) {
    if (expected.name == blob_name) {
      return &expected;
    }
  }
  return nullptr;
}

void Job::declare(BlobSpec spec, std::span<const std::byte> initial, BlobUse use) {
  validate_name(spec.name, "blob name");
  if (spec.kind == BlobKind::kGlobalArray && spec.shape.empty()) {
    throw UsageError("global array '" + spec.name + "' needs at least one dimension");
  }
  if (spec.kind != BlobKind::kPerNode && use.output) {
    throw UsageError("blob '" + spec.name + "': only per-node blobs are gathered as outputs");
  }
  spec.on_rank_change = use.on_rank_change;
  spec.initial.assign(initial.begin(), initial.end());
  if (find_blob(spec.name) != nullptr) {
    throw UsageError("blob '" + spec.name + "' is declared twice");
  }
  if (use.output) {
    outputs_.push_back(spec.name);
  }
  if (!declared_) {
    declared_ = std::make_shared<std::vector<BlobSpec>>();
    // First in the group, so that the job's own init tasks find every declared blob.
    init_group.add_first("create_declared_blobs", [declared = declared_](TaskContext& context) {
      for (const auto& blob : *declared) {
        context.workspace.put(blob.name, blob.created(context.comm.rank(), context.comm.size()));
      }
    });
  }
  declared_->push_back(std::move(spec));
}

}  // namespace epochrun
