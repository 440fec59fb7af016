#include "blob_view.hpp"

#include <iterator>

namespace epochrun {

std::vector<BlobView> blob_views(const Workspace& workspace,
                                 const std::vector<std::string>& names) {
  std::vector<BlobView> views;
  views.reserve(names.size());
  // Names in the workspace's order (a job saves workspace.names()) are found by walking it
  // alongside, without a search each.
  const auto& blobs = workspace.blobs();
  auto next = blobs.begin();
  for (const auto& name : names) {
    const auto found = next != blobs.end() && next->first == name ? next : blobs.find(name);
    if (found == blobs.end()) {
      workspace.get(name);  // throws the UsageError naming the missing blob
    }
    const auto& blob = found->second;
    views.push_back(
        BlobView{name, blob.dtype(), blob.shape(), blob.raw(), std::nullopt, false, std::nullopt});
    next = std::next(found);
  }
  return views;
}

}  // namespace epochrun
