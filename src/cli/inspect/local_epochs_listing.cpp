#include "inspect/local_epochs_listing.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"
#include "local_manifest.hpp"

namespace epochrun::cli {

nlohmann::json describe_local_epochs(const std::filesystem::path& dir) {
  auto entries = nlohmann::json::array();
  std::vector<std::int64_t> flushed;
  try {
    flushed = CheckpointDirectory(dir).committed_epochs();
  } catch (const std::exception&) {
    // a directory without committed checkpoints may still hold manifests
  }
  for (const auto epoch : local_manifest_epochs(dir)) {
    const bool is_flushed = std::binary_search(flushed.begin(), flushed.end(), epoch);
    nlohmann::json entry = {{"epoch", epoch},
                            {"manifest", local_manifest_file(dir, epoch).filename().string()},
                            {"flushed", is_flushed}};
    try {
      const auto manifest = read_local_manifest(dir, epoch);
      std::map<std::string, std::vector<int>> hosts;
      for (const auto& part : manifest.parts) {
        hosts[part.host].push_back(part.rank);
      }
      entry["valid"] = true;
      entry["job"] = manifest.job;
      entry["ranks"] = manifest.ranks;
      entry["redundancy"] = manifest.redundancy;
      entry["hosts"] = hosts;
      entry["recoverable"] = true;
      entry["why"] = manifest.redundancy == "none"
                         ? "while every listed host keeps its copies in its node-local directory, "
                           "on as many ranks (no redundancy: a lost host loses the epoch)"
                     : manifest.redundancy == "partner"
                         ? "while every listed host keeps its copies, or all but one of them "
                           "(partner redundancy: the next host's partner copies rebuild a lost "
                           "host's parts), on as many ranks"
                         : "while every listed host keeps its copies, or all but one of each "
                           "set of hosts (" +
                               manifest.redundancy +
                               " redundancy: the set's XOR parity rebuilds a lost host's parts), "
                               "on as many ranks";
    } catch (const std::exception& error) {
      entry["valid"] = false;
      entry["recoverable"] = is_flushed;
      entry["error"] = error.what();
      entry["why"] =
          is_flushed ? "from the flushed checkpoint only" : "no: its manifest is damaged";
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

void print_local_epochs(std::ostream& out, const std::filesystem::path& dir,
                        const nlohmann::json& entries) {
  if (entries.empty()) {
    return;
  }
  out << "node-local epochs in " << dir.string() << ": " << entries.size()
      << " (their data is in the hosts' node-local directories)\n";
  for (const auto& entry : entries) {
    out << "epoch " << entry["epoch"] << "  " << entry["manifest"].get<std::string>();
    if (!entry["valid"].get<bool>()) {
      out << "  DAMAGED: " << entry["error"].get<std::string>()
          << "  recoverable: " << entry["why"].get<std::string>() << "\n";
      continue;
    }
    out << "  node-local on ";
    bool first = true;
    for (const auto& [host, ranks] : entry["hosts"].items()) {
      out << (first ? "" : ", ") << host << " (rank" << (ranks.size() > 1 ? "s " : " ");
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        out << (i ? ", " : "") << ranks[i];
      }
      out << ")";
      first = false;
    }
    out << (entry["flushed"].get<bool>() ? "  flushed too" : "  not flushed") << "  recoverable "
        << entry["why"].get<std::string>() << "\n";
  }
}

}  // namespace epochrun::cli
