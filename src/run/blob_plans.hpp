// How a run stores each blob, from the job's declarations: global arrays and replicated blobs as
// declared (a global array's blocks computed for every rank), every other blob per node; and
// what a load at another rank count needs from the job. Internal to the library.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "blob_plan.hpp"
#include "checkpoint_load_v3.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/job.hpp"

namespace epochrun {

// Collective: UsageError on every rank, naming the array and the ranks, when the blocks of a
// declared global array do not tile its global shape (rank 0 checks, the ranks agree).
void check_global_arrays(const Job& job, const Communicator& comm,
                         std::chrono::duration<double> timeout);

// The plan of each blob in `names` (a workspace's, in its order).
std::vector<BlobPlan> blob_plans(const Job& job, const Communicator& comm,
                                 const std::vector<std::string>& names);

// What loading `epoch` asks: the blocks of the declared global arrays for this run's ranks, and
// the rules of per-node blobs declared with a RankChange.
LoadRequest load_request(const Job& job, const Communicator& comm, std::int64_t epoch,
                         const std::vector<std::string>& node_names, const MpiIoHints& hints);

}  // namespace epochrun
