// `epochrun inspect DIR`'s view of the node-local epochs (--local-dir with --flush-every): from
// the manifests in DIR, per epoch, on which hosts its parts are, whether it is flushed too, and
// whether it is recoverable as far as DIR can tell (the copies themselves are on the hosts).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

namespace epochrun::cli {

// One entry per manifest in `dir`, ascending by epoch: {"epoch", "manifest", "job", "ranks",
// "redundancy", "hosts": {host: [ranks]}, "flushed", "recoverable", "why"}, or "valid" false
// and "error" for a manifest that does not parse.
nlohmann::json describe_local_epochs(const std::filesystem::path& dir);

// The entries as text, a line each; nothing when there are none.
void print_local_epochs(std::ostream& out, const std::filesystem::path& dir,
                        const nlohmann::json& entries);

}  // namespace epochrun::cli
