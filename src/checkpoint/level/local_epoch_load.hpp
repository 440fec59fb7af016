// A resume's load of a node-local epoch: one that was never flushed, committed by its manifest
// (local_manifest.hpp) and held only in the ranks' node-local copies (--local-dir). Internal to
// the library.
#pragma once

#include <chrono>
#include <filesystem>

#include "checkpoint_load_v3.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"
#include "local_manifest.hpp"

namespace epochrun {

// Collective, bounded by `timeout`. The epoch `manifest` commits is recoverable when every rank
// finds its copy in `dir` (whichever host it now runs on), the copy's record is the one the
// manifest records for this rank (its xxh64 and the file's size), written by the manifest's
// job for this epoch as this rank of as many ranks, a global array's block the shape this rank
// now asks for, and every byte of every value verifies against the record's xxh64. Then this
// rank's values go into `workspace` (on every rank, or on none) and the load is described as
// Loaded (config_json the manifest's). Otherwise CheckpointError (of some class) on every rank,
// whose message names the lowest failing rank, the host its copy was written on and why
// ("rank 2: the node-local copy written on host2, read on host4: ...: No such file or
// directory").
Loaded load_local_epoch(const std::filesystem::path& dir, const LocalManifest& manifest,
                        const LoadRequest& request, const Communicator& comm, Workspace& workspace,
                        std::chrono::duration<double> timeout);

}  // namespace epochrun
