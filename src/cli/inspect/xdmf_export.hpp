// `epochrun inspect DIR --xdmf OUT.xmf`: one XDMF file describing every committed epoch's global
// arrays as a time series (format/xdmf_collection.hpp), pointing into the checkpoint files.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "inspect/inspect_source.hpp"

namespace epochrun::cli {

// Writes `file` (atomically) from the checkpoints of `source`, each opened and checked as a
// listing opens it; one that does not open is left out and named in the result's "skipped"
// ({"epochs": [...], "arrays": N, "skipped": [{"epoch", "error"}]}).
nlohmann::json export_xdmf(const InspectSource& source, const std::filesystem::path& file);

}  // namespace epochrun::cli
