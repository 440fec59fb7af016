// A Workspace: one node's named blobs. Each rank owns one; all state that must survive a
// restart lives here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/export.hpp"

namespace epochrun {

class EPOCHRUN_API Workspace {
 public:
  bool has(const std::string& name) const { return blobs_.contains(name); }
  // Throws UsageError naming the blob when it is missing.
  Blob& get(const std::string& name);
  const Blob& get(const std::string& name) const;
  // Inserts or replaces; the name is validated (see names.hpp).
  Blob& put(const std::string& name, Blob blob);
  void erase(const std::string& name) { blobs_.erase(name); }
  void clear() { blobs_.clear(); }

  // Sorted, so every rank and every run sees the same order.
  std::vector<std::string> names() const;
  std::size_t size() const { return blobs_.size(); }
  std::size_t byte_size() const;

  const std::map<std::string, Blob>& blobs() const { return blobs_; }

 private:
  std::map<std::string, Blob> blobs_;
};

}  // namespace epochrun
