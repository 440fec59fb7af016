// A Job: the init / epoch / download / exit task groups, its stop conditions and its declared
// outputs. The JobRunner decides when each group runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/blob_handle.hpp"
#include "epochrun/export.hpp"
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

// What a job does with a declared blob besides keeping it in the checkpoint. Every rank (node)
// holds its own value of the declared shape, checkpointed per node.
struct BlobUse {
  // Gathered from every node to rank 0 for the download group (TaskContext::gathered) and
  // reported per node in the run summary.
  bool output = false;
};

class EPOCHRUN_API Job {
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

  // Declares a blob once, with its element type and shape: the init group creates it on every
  // node (zero-filled; a scalar with `initial`) before the job's own init tasks run, a loaded
  // checkpoint must hold it with this dtype and shape (else CheckpointMismatch naming it), and
  // tasks reach it typed through the returned handle. Throws UsageError for an invalid or
  // repeated name.
  template <Element T>
  BlobHandle<T> blob(std::string blob_name, Shape shape, BlobUse use = {}) {
    declare(BlobSpec{blob_name, DTypeOf<T>::value, std::move(shape)}, {}, use);
    return BlobHandle<T>(std::move(blob_name));
  }
  template <Element T>
  ScalarHandle<T> scalar(std::string blob_name, T initial = T{}, BlobUse use = {}) {
    declare(BlobSpec{blob_name, DTypeOf<T>::value, {}},
            std::as_bytes(std::span<const T>(&initial, 1)), use);
    return ScalarHandle<T>(std::move(blob_name));
  }
  // Opaque state of `size` bytes (dtype "bytes").
  BytesHandle bytes(std::string blob_name, std::uint64_t size, BlobUse use = {}) {
    return blob<std::byte>(std::move(blob_name), {size}, use);
  }

  // The declared blobs, in declaration order, as a resume checks them.
  const std::vector<BlobSpec>& expected_blobs() const { return expected_blobs_; }
  // The blobs declared with {.output = true}, which the download phase gathers.
  const std::vector<std::string>& outputs() const { return outputs_; }

  // Declares one of the job's options (its key without the "<job>." prefix) as defining the
  // run: the data or the problem, such as a seed or a size. Resuming a checkpoint written with
  // another value is refused (CheckpointMismatch) unless --allow-config-change names it; any
  // other job option may change on resume (the change is logged and applied).
  void declare_run_defining_option(std::string key);
  const std::vector<std::string>& run_defining_options() const { return run_defining_options_; }

 private:
  // `initial` holds the blob's bytes, or is empty for zeros.
  void declare(BlobSpec spec, std::span<const std::byte> initial, BlobUse use);

  std::string name_;
  std::vector<StopCondition> stop_conditions_;
  std::vector<std::string> outputs_;
  std::vector<BlobSpec> expected_blobs_;
  std::vector<std::string> run_defining_options_;
  // The declared blobs, shared with the init task that creates them (copies of a Job share
  // them: declare every blob before copying a Job).
  struct Declared {
    BlobSpec spec;
    std::vector<std::byte> initial;  // empty: zero-filled
  };
  std::shared_ptr<std::vector<Declared>> declared_;
};

}  // namespace epochrun
