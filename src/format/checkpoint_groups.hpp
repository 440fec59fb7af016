// The HDF5 groups a checkpoint file lays its blobs out under (docs/FORMAT.md): the format's own
// business, which a reader of the public API never names.
#pragma once

namespace epochrun {

// Group under which each node's group of datasets lives: /nodes/<node>/<blob>.
inline constexpr const char* kNodesGroup = "nodes";
// Group under which each node's blob index, pack and checksum table live (version 2):
// /index/<node>/{blobs,packed,xxh64}. Apart from /nodes, so that no blob name can clash.
inline constexpr const char* kIndexGroup = "index";

}  // namespace epochrun
