// A Job: the init / epoch / download / exit task groups, its stop conditions and its declared
// outputs. The JobRunner decides when each group runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epochrun/blob_handle.hpp"
#include "epochrun/export.hpp"
#include "epochrun/global_array.hpp"
#include "epochrun/task.hpp"

namespace epochrun {

// A named predicate over one node's workspace, evaluated after every epoch; when it holds on
// any node, the job stops after that epoch's checkpoint.
struct StopCondition {
  std::string name;
  std::function<bool(const Workspace&)> holds;
};

// How a checkpoint stores a declared blob, and what a resume at another rank count does with it.
enum class BlobKind {
  kPerNode,      // every rank (node) its own value
  kReplicated,   // the same value on every rank: stored once, loaded by every rank
  kGlobalArray,  // one array of a global shape, each rank holding a block of it
};

// The block of a global array rank `rank` of `ranks` holds. Over all ranks, the blocks must tile
// the global shape exactly (check_tiling); the default is balanced_block.
using BlockRule = std::function<Block(const Shape& global_shape, int rank, int ranks)>;

// What a resume at another rank count does with a per-node blob. Without a rule such a resume is
// refused before any epoch runs (CheckpointMismatch naming the blob).
struct RankChange {
  enum class Kind { kRefuse, kRecreate, kRedistribute };
  Kind kind = Kind::kRefuse;
  // kRedistribute: this rank's new value from every old node's value (index = old rank), each
  // read and verified from the checkpoint.
  std::function<Blob(const std::vector<Blob>& old_values, int rank, int ranks)> redistribute;

  // The blob is created anew as the init group declares it (zeros, or a scalar's initial value).
  static RankChange recreate() { return {Kind::kRecreate, {}}; }
  static RankChange redistribute_with(
      std::function<Blob(const std::vector<Blob>& old_values, int rank, int ranks)> rule) {
    return {Kind::kRedistribute, std::move(rule)};
  }
};

// What a job expects a blob to be after a resume: a checkpoint written with another
// configuration (a changed shape or dtype) is refused instead of misread.
struct BlobSpec {
  std::string name;
  DType dtype;
  // Per-node and replicated: the value's shape; global array: the global shape.
  Shape shape;
  BlobKind kind = BlobKind::kPerNode;
  // Global arrays: each rank's block (empty: balanced_block).
  BlockRule block_rule;
  // Per-node blobs: a resume at another rank count.
  RankChange on_rank_change;
  // The value init creates (a scalar's initial value); empty: zeros.
  std::vector<std::byte> initial;

  // Global arrays: the block of `rank` of `ranks`.
  EPOCHRUN_API Block block(int rank, int ranks) const;
  // The shape rank `rank` of `ranks` holds: the block's count for a global array.
  EPOCHRUN_API Shape local_shape(int rank, int ranks) const;
  // The value the init group creates on rank `rank` of `ranks`.
  EPOCHRUN_API Blob created(int rank, int ranks) const;
};

// What a job does with a declared blob besides keeping it in the checkpoint.
struct BlobUse {
  // Gathered from every node to rank 0 for the download group (TaskContext::gathered) and
  // reported per node in the run summary. Per-node blobs only.
  bool output = false;
  // Per-node blobs: what a resume at another rank count does with it (refused when unset).
  RankChange on_rank_change = {};
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
    declare(
        BlobSpec{blob_name, DTypeOf<T>::value, std::move(shape), BlobKind::kPerNode, {}, {}, {}},
        {}, use);
    return BlobHandle<T>(std::move(blob_name));
  }
  template <Element T>
  ScalarHandle<T> scalar(std::string blob_name, T initial = T{}, BlobUse use = {}) {
    declare(BlobSpec{blob_name, DTypeOf<T>::value, {}, BlobKind::kPerNode, {}, {}, {}},
            std::as_bytes(std::span<const T>(&initial, 1)), use);
    return ScalarHandle<T>(std::move(blob_name));
  }
  // Opaque state of `size` bytes (dtype "bytes").
  BytesHandle bytes(std::string blob_name, std::uint64_t size, BlobUse use = {}) {
    return blob<std::byte>(std::move(blob_name), {size}, use);
  }

  // A replicated blob: every rank holds the same value (a model's parameters), which the
  // checkpoint stores once and a resume at any rank count loads on every rank. The job keeps the
  // ranks' values equal; --check-replicated verifies it at every save.
  template <Element T>
  BlobHandle<T> replicated(std::string blob_name, Shape shape) {
    declare(
        BlobSpec{blob_name, DTypeOf<T>::value, std::move(shape), BlobKind::kReplicated, {}, {}, {}},
        {}, {});
    return BlobHandle<T>(std::move(blob_name));
  }
  template <Element T>
  ScalarHandle<T> replicated_scalar(std::string blob_name, T initial = T{}) {
    declare(BlobSpec{blob_name, DTypeOf<T>::value, {}, BlobKind::kReplicated, {}, {}, {}},
            std::as_bytes(std::span<const T>(&initial, 1)), {});
    return ScalarHandle<T>(std::move(blob_name));
  }

  // A global array of `global_shape`, each rank holding the block `rule` gives it (default:
  // balanced_block, the shape split over the process grid MPI_Dims_create would choose). The
  // checkpoint stores it as one dataset of the global shape, written collectively; a resume at
  // another rank count re-partitions it. The runner refuses blocks that do not tile the array
  // (UsageError naming the ranks) before the first epoch. The workspace holds the rank's block,
  // row-major, zero-filled by the init group.
  template <Element T>
  GlobalArrayHandle<T> global_array(std::string blob_name, Shape global_shape,
                                    BlockRule rule = {}) {
    BlobSpec spec{blob_name,
                  DTypeOf<T>::value,
                  std::move(global_shape),
                  BlobKind::kGlobalArray,
                  std::move(rule),
                  {},
                  {}};
    GlobalArrayHandle<T> handle(std::move(blob_name), spec.shape, spec.block_rule);
    declare(std::move(spec), {}, {});
    return handle;
  }

  // The declared blob named `blob_name`, or nullptr.
  const BlobSpec* find_blob(const std::string& blob_name) const;

  // The declared blobs, in declaration order, as a resume checks them.
  const std::vector<BlobSpec>& expected_blobs() const;
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
  std::vector<std::string> run_defining_options_;
  // The declared blobs, shared with the init task that creates them (copies of a Job share
  // them: declare every blob before copying a Job).
  std::shared_ptr<std::vector<BlobSpec>> declared_;
};

}  // namespace epochrun
