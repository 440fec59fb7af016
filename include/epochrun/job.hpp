// A Job: the init / epoch / download / exit task groups, its stop conditions and its declared
// outputs. The JobRunner decides when each group runs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "epochrun/task.hpp"

namespace epochrun {

// A named predicate over one node's workspace, evaluated after every epoch; when it holds on
// any node, the job stops after that epoch's checkpoint.
struct StopCondition {
  std::string name;
  std::function<bool(const Workspace&)> holds;
};

// What a job expects a blob to be after a resume: a checkpoint written with another
// configuration (a changed shape or dtype) is refused instead of misread.
struct BlobSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

class Job {
 public:
  explicit Job(std::string name);

  const std::string& name() const { return name_; }
  // The node name of a rank: "trainer_<rank>", as in the reference.
  static std::string node_name(int rank);

  TaskGroup init_group{"init"};          // once, only when starting from scratch
  TaskGroup epoch_group{"epoch"};        // in a loop
  TaskGroup download_group{"download"};  // once after the loop, after outputs are gathered
  TaskGroup exit_group{"exit"};          // once at the very end

  void add_stop_condition(std::string condition_name, std::function<bool(const Workspace&)> holds);
  const std::vector<StopCondition>& stop_conditions() const { return stop_conditions_; }

  // Blobs that the download phase gathers from every node to rank 0 and that the run
  // summary reports per node.
  void declare_output(std::string blob_name);
  const std::vector<std::string>& outputs() const { return outputs_; }

  // Declares one of the job's options (its key without the "<job>." prefix) as defining the
  // run: the data or the problem, such as a seed or a size. Resuming a checkpoint written with
  // another value is refused (CheckpointMismatch) unless --allow-config-change names it; any
  // other job option may change on resume (the change is logged and applied).
  void declare_run_defining_option(std::string key);
  const std::vector<std::string>& run_defining_options() const { return run_defining_options_; }

  // Declares a blob's dtype and shape; a loaded checkpoint must match (CheckpointMismatch).
  void expect_blob(std::string blob_name, DType dtype, Shape shape);
  const std::vector<BlobSpec>& expected_blobs() const { return expected_blobs_; }

 private:
  std::string name_;
  std::vector<StopCondition> stop_conditions_;
  std::vector<std::string> outputs_;
  std::vector<BlobSpec> expected_blobs_;
  std::vector<std::string> run_defining_options_;
};

}  // namespace epochrun
