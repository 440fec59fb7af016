// Tasks and task groups: the units a Job is made of. A task is ordinary C++ that runs on
// every rank (SPMD) against that rank's workspace.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/export.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// Blobs gathered to rank 0 by the download group: node name -> blob name -> blob.
using GatheredBlobs = std::map<std::string, std::map<std::string, Blob>>;

struct EPOCHRUN_API TaskContext {
  Workspace& workspace;
  const Communicator& comm;
  const std::string& node_name;
  // The epoch being run; 0 during init; the last epoch during download and exit.
  std::int64_t epoch = 0;
  // Rank 0 only, from the download phase on: every node's declared outputs (what the
  // runner gathered; tasks read them typed through gathered()).
  const GatheredBlobs* downloaded = nullptr;

  // True where gathered() has values: on rank 0 in the download and exit groups.
  bool has_gathered() const { return downloaded != nullptr; }
  // Node name -> that node's value of an output blob, through its handle (Job::blob, scalar,
  // bytes declared with {.output = true}): spans of T for arrays, T for scalars. Throws
  // UsageError where has_gathered() is false.
  template <typename Handle>
  auto gathered(const Handle& blob) const {
    return blob.gathered_from(gathered_blobs());
  }
  const GatheredBlobs& gathered_blobs() const;

  // True once this rank has received a preemption signal (--preempt-signals). The runner
  // stops after the epoch in progress anyway; a task may use this to end long work early,
  // as far as the state it leaves in the workspace stays one a resume can continue from.
  bool preemption_requested() const;
};

using TaskFunction = std::function<void(TaskContext&)>;

struct Task {
  std::string name;
  TaskFunction run;
};

class EPOCHRUN_API TaskGroup {
 public:
  explicit TaskGroup(std::string name) : name_(std::move(name)) {}

  void add(std::string task_name, TaskFunction run);
  // Adds a task that runs before those added so far.
  void add_first(std::string task_name, TaskFunction run);
  // Runs the tasks in order. A task's exception is rethrown as an Error naming the group,
  // the task and the node.
  void run(TaskContext& context) const;

  const std::string& name() const { return name_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  bool empty() const { return tasks_.empty(); }

 private:
  std::string name_;
  std::vector<Task> tasks_;
};

}  // namespace epochrun
