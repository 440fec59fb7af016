#include "inspect/checkpoint_diff.hpp"

#include <map>
#include <set>

#include "inspect/inspect_listing.hpp"

namespace epochrun::cli {
namespace {

using BlobKey = std::pair<std::string, std::string>;  // node, blob

std::map<BlobKey, const BlobRecord*> records_of(const CheckpointHeader& header) {
  std::map<BlobKey, const BlobRecord*> records;
  for (const auto& [node, blobs] : header.blobs) {
    for (const auto& record : blobs) {
      records[{node, record.name}] = &record;
    }
  }
  return records;
}

// The run's configuration as recorded (an object of option -> value); empty when unreadable.
nlohmann::json config_of(const CheckpointHeader& header) {
  auto config = nlohmann::json::parse(header.config_json, nullptr, false);
  return config.is_object() ? config : nlohmann::json::object();
}

nlohmann::json config_changes(const CheckpointHeader& from, const CheckpointHeader& to) {
  const auto before = config_of(from);
  const auto after = config_of(to);
  auto changes = nlohmann::json::array();
  std::set<std::string> keys;
  for (const auto* config : {&before, &after}) {
    for (const auto& [key, value] : config->items()) {
      keys.insert(key);
    }
  }
  for (const auto& key : keys) {
    const auto old_value = before.value(key, nlohmann::json());
    const auto new_value = after.value(key, nlohmann::json());
    if (old_value != new_value) {
      changes.push_back({{"key", key}, {"from", old_value}, {"to", new_value}});
    }
  }
  return changes;
}

std::string type_text(const nlohmann::json& record) {
  return record["dtype"].get<std::string>() + shape_to_string(record["shape"].get<Shape>());
}

}  // namespace

nlohmann::json diff_checkpoints(const CheckpointHeader& from, const CheckpointHeader& to) {
  const auto before = records_of(from);
  const auto after = records_of(to);
  auto added = nlohmann::json::array();
  auto removed = nlohmann::json::array();
  auto changed = nlohmann::json::array();
  std::uint64_t unchanged = 0;
  for (const auto& [key, record] : before) {
    const auto name = key.first + "/" + key.second;
    const auto found = after.find(key);
    if (found == after.end()) {
      removed.push_back({{"blob", name}, {"from", record_json(*record)}});
      continue;
    }
    const auto& other = *found->second;
    if (record->dtype == other.dtype && record->shape == other.shape &&
        record->xxh64 == other.xxh64) {
      ++unchanged;
      continue;
    }
    changed.push_back({{"blob", name}, {"from", record_json(*record)}, {"to", record_json(other)}});
  }
  for (const auto& [key, record] : after) {
    if (!before.contains(key)) {
      added.push_back({{"blob", key.first + "/" + key.second}, {"to", record_json(*record)}});
    }
  }
  return {{"from_epoch", from.epoch},
          {"to_epoch", to.epoch},
          {"added", added},
          {"removed", removed},
          {"changed", changed},
          {"unchanged", unchanged},
          {"config_changes", config_changes(from, to)}};
}

void print_diff(std::ostream& out, const nlohmann::json& diff) {
  out << "epoch " << diff["from_epoch"] << " -> epoch " << diff["to_epoch"] << ": "
      << diff["changed"].size() << " changed, " << diff["added"].size() << " added, "
      << diff["removed"].size() << " removed, " << diff["unchanged"] << " unchanged blobs; "
      << diff["config_changes"].size() << " configuration changes\n";
  for (const auto& blob : diff["changed"]) {
    const auto& before = blob["from"];
    const auto& after = blob["to"];
    out << "changed  " << blob["blob"].get<std::string>() << "  " << type_text(before);
    if (type_text(before) != type_text(after)) {
      out << " -> " << type_text(after);
    }
    out << "  xxh64 " << before["xxh64"].get<std::string>() << " -> "
        << after["xxh64"].get<std::string>() << "\n";
  }
  for (const auto& blob : diff["added"]) {
    out << "added    " << blob["blob"].get<std::string>() << "  " << type_text(blob["to"]) << "\n";
  }
  for (const auto& blob : diff["removed"]) {
    out << "removed  " << blob["blob"].get<std::string>() << "  " << type_text(blob["from"])
        << "\n";
  }
  for (const auto& change : diff["config_changes"]) {
    out << "config   " << change["key"].get<std::string>() << ": " << change["from"].dump()
        << " -> " << change["to"].dump() << "\n";
  }
}

}  // namespace epochrun::cli
