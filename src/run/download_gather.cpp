#include "download_gather.hpp"

#include <map>

#include "blob_codec.hpp"
#include "collective_errors.hpp"

namespace epochrun {

GatheredBlobs gather_outputs(const Job& job, const Communicator& comm,
                             const std::vector<std::string>& node_names,
                             const Workspace& workspace) {
  std::map<std::string, Blob> mine;
  run_then_agree(comm, "gather declared outputs", [&] {
    for (const auto& name : job.outputs()) {
      mine.emplace(name, workspace.get(name));
    }
  });
  auto buffers = comm.gather(encode_blobs(mine));
  GatheredBlobs gathered;
  for (std::size_t rank = 0; rank < buffers.size(); ++rank) {
    gathered[node_names[rank]] = decode_blobs(buffers[rank]);
  }
  return gathered;
}

}  // namespace epochrun
