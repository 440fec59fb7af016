// How a run saves each of its blobs, decided once per run from the job's declarations: the
// kind of storage and, for a global array, its global shape and every rank's block. Internal to
// the library.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "blob_index.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {

struct BlobPlan {
  std::string name;
  // kPerNode (the ranks find out at each save whether it is ragged), kReplicated or
  // kGlobalArray.
  StorageKind kind = StorageKind::kPerNode;
  Shape global_shape;                                // global arrays
  std::shared_ptr<const std::vector<Block>> blocks;  // global arrays: index = rank
};

}  // namespace epochrun
