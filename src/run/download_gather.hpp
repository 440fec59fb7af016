// The download group's input: every node's declared outputs gathered to rank 0.
#pragma once

#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/job.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// Collective. Rank 0 gets each node's outputs by node name; the others an empty map. A missing
// output fails on every rank.
GatheredBlobs gather_outputs(const Job& job, const Communicator& comm,
                             const std::vector<std::string>& node_names,
                             const Workspace& workspace);

}  // namespace epochrun
