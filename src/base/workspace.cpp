#include "epochrun/workspace.hpp"

#include "epochrun/names.hpp"

namespace epochrun {

Blob& Workspace::get(const std::string& name) {
  auto found = blobs_.find(name);
  if (found == blobs_.end()) {
    throw UsageError("workspace has no blob '" + name + "'");
  }
  return found->second;
}

const Blob& Workspace::get(const std::string& name) const {
  return const_cast<Workspace*>(this)->get(name);
}

Blob& Workspace::put(const std::string& name, Blob blob) {
  validate_name(name, "blob name");
  // Names put in increasing order (a load puts a checkpoint's blobs in the order they were
  // saved, a workspace's) go at the end without a search.
  if (blobs_.empty() || blobs_.rbegin()->first < name) {
    return blobs_.emplace_hint(blobs_.end(), name, std::move(blob))->second;
  }
  return blobs_.insert_or_assign(name, std::move(blob)).first->second;
}

std::vector<std::string> Workspace::names() const {
  std::vector<std::string> names;
  names.reserve(blobs_.size());
  for (const auto& [name, blob] : blobs_) {
    names.push_back(name);
  }
  return names;
}

std::size_t Workspace::byte_size() const {
  std::size_t total = 0;
  for (const auto& [name, blob] : blobs_) {
    total += blob.byte_size();
  }
  return total;
}

}  // namespace epochrun
