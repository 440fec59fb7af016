// A resume's load from the ranks' node-local copies (--local-dir) instead of the shared
// checkpoint file, when every rank has a whole one of the epoch being resumed. Internal to the
// library.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_layout_v3.hpp"
#include "checkpoint_load_v3.hpp"
#include "epochrun/blob.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun {

// Collective, one bounded agreement. When every rank finds its copy of the epoch `stored`
// describes in `dir`, written by this job as this rank of as many ranks on this host, holding
// exactly the values the committed file records for this rank (the same blobs, shapes and
// xxh64, a global array's block the one this rank now asks for) and every byte of it verifies:
// this rank's values, read from its copy. Otherwise nullopt on every rank (rank 0 logs the
// first rank's reason), and the shared file is to be loaded.
std::optional<std::vector<std::pair<std::string, Blob>>> load_local_copies(
    const std::filesystem::path& dir, const StoredFileV3& stored, const LoadRequest& request,
    const Communicator& comm, std::chrono::duration<double> timeout);

}  // namespace epochrun
