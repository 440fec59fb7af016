// Typed handles to the blobs a Job declares (Job::blob, Job::scalar, Job::bytes). A handle is a
// name and an element type: copy it into tasks freely; it reads and writes the blob of the
// workspace (or task context) it is given, so one handle serves every rank and every run.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "epochrun/global_array.hpp"
#include "epochrun/task.hpp"

namespace epochrun {

// An n-dimensional blob of T, seen as its flat row-major elements.
template <Element T>
class BlobHandle {
 public:
  explicit BlobHandle(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  std::span<T> of(Workspace& workspace) const { return workspace.get(name_).template as<T>(); }
  std::span<const T> of(const Workspace& workspace) const {
    return workspace.get(name_).template as<T>();
  }
  std::span<T> of(TaskContext& context) const { return of(context.workspace); }

  // The Blob itself, e.g. to swap its storage with a scratch buffer of the same shape.
  Blob& blob(Workspace& workspace) const { return workspace.get(name_); }

  // Node name -> that node's elements, from the download group's gathered outputs (use
  // TaskContext::gathered).
  std::map<std::string, std::span<const T>> gathered_from(const GatheredBlobs& gathered) const {
    std::map<std::string, std::span<const T>> values;
    for (const auto& [node, outputs] : gathered) {
      values.emplace(node, output_of(outputs, node).template as<T>());
    }
    return values;
  }

 protected:
  const Blob& output_of(const std::map<std::string, Blob>& outputs, const std::string& node) const {
    auto found = outputs.find(name_);
    if (found == outputs.end()) {
      throw UsageError("blob '" + name_ + "' was not gathered from " + node +
                       ": declare it with {.output = true}");
    }
    return found->second;
  }

 private:
  std::string name_;
};

// A blob holding one T (shape []).
template <Element T>
class ScalarHandle : private BlobHandle<T> {
 public:
  using BlobHandle<T>::BlobHandle;
  using BlobHandle<T>::name;

  T& of(Workspace& workspace) const { return workspace.get(name()).template item<T>(); }
  T of(const Workspace& workspace) const { return workspace.get(name()).template item<T>(); }
  T& of(TaskContext& context) const { return of(context.workspace); }

  // Node name -> that node's value.
  std::map<std::string, T> gathered_from(const GatheredBlobs& gathered) const {
    std::map<std::string, T> values;
    for (const auto& [node, outputs] : gathered) {
      values.emplace(node, this->output_of(outputs, node).template item<T>());
    }
    return values;
  }
};

// Opaque bytes (dtype "bytes"): optimizer state, serialized RNG state...
using BytesHandle = BlobHandle<std::byte>;

// A global array (Job::global_array): the workspace holds this rank's block of it, row-major.
template <Element T>
class GlobalArrayHandle : public BlobHandle<T> {
 public:
  GlobalArrayHandle(std::string name, Shape global_shape,
                    std::function<Block(const Shape&, int, int)> rule)
      : BlobHandle<T>(std::move(name)),
        global_shape_(std::move(global_shape)),
        rule_(std::move(rule)) {}

  const Shape& global_shape() const { return global_shape_; }
  // The block rank `rank` of `ranks` holds.
  Block block(int rank, int ranks) const {
    return rule_ ? rule_(global_shape_, rank, ranks) : balanced_block(global_shape_, ranks, rank);
  }
  // This rank's block.
  Block block(const TaskContext& context) const {
    return block(context.comm.rank(), context.comm.size());
  }

 private:
  Shape global_shape_;
  std::function<Block(const Shape&, int, int)> rule_;
};

}  // namespace epochrun
