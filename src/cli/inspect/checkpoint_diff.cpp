#include "inspect/checkpoint_diff.hpp"

#include <map>
#include <set>

#include "inspect/global_array_entry.hpp"
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

// The per-node records' comparison, for version 3's replicated blobs (as "replicated/name").
void diff_replicated(const CheckpointHeader& from, const CheckpointHeader& to,
                     nlohmann::json& diff) {
  std::map<std::string, const BlobRecord*> after;
  for (const auto& record : to.replicated) {
    after[record.name] = &record;
  }
  for (const auto& record : from.replicated) {
    const auto name = "replicated/" + record.name;
    const auto found = after.find(record.name);
    if (found == after.end()) {
      diff["removed"].push_back({{"blob", name}, {"from", record_json(record)}});
    } else if (record.dtype == found->second->dtype && record.shape == found->second->shape &&
               record.xxh64 == found->second->xxh64) {
      diff["unchanged"] = diff["unchanged"].get<std::uint64_t>() + 1;
    } else {
      diff["changed"].push_back(
          {{"blob", name}, {"from", record_json(record)}, {"to", record_json(*found->second)}});
    }
    after.erase(record.name);
  }
  for (const auto& [name, record] : after) {
    diff["added"].push_back({{"blob", "replicated/" + name}, {"to", record_json(*record)}});
  }
}

bool same_array(const GlobalArrayRecord& a, const GlobalArrayRecord& b,
                const SameArrayValues& same_values) {
  if (a.dtype != b.dtype || a.global_shape != b.global_shape) {
    return false;
  }
  if (a.writer_blocks == b.writer_blocks) {
    return a.writer_xxh64 == b.writer_xxh64;
  }
  return same_values && same_values(a, b);
}

// Version 3's global arrays (as "arrays/name"), compared whole whatever ranks wrote them.
void diff_arrays(const CheckpointHeader& from, const CheckpointHeader& to,
                 const SameArrayValues& same_values, nlohmann::json& diff) {
  std::map<std::string, const GlobalArrayRecord*> after;
  for (const auto& array : to.arrays) {
    after[array.name] = &array;
  }
  for (const auto& array : from.arrays) {
    const auto name = "arrays/" + array.name;
    const auto found = after.find(array.name);
    if (found == after.end()) {
      diff["removed"].push_back({{"blob", name}, {"from", array_json(array)}});
    } else if (same_array(array, *found->second, same_values)) {
      diff["unchanged"] = diff["unchanged"].get<std::uint64_t>() + 1;
    } else {
      diff["changed"].push_back(
          {{"blob", name}, {"from", array_json(array)}, {"to", array_json(*found->second)}});
    }
    after.erase(array.name);
  }
  for (const auto& [name, array] : after) {
    diff["added"].push_back({{"blob", "arrays/" + name}, {"to", array_json(*array)}});
  }
}

std::string type_text(const nlohmann::json& record) {
  return record["dtype"].get<std::string>() + shape_to_string(record["shape"].get<Shape>());
}

}  // namespace

nlohmann::json diff_checkpoints(const CheckpointHeader& from, const CheckpointHeader& to,
                                const SameArrayValues& same_values) {
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
  nlohmann::json diff = {{"from_epoch", from.epoch},
                         {"to_epoch", to.epoch},
                         {"added", added},
                         {"removed", removed},
                         {"changed", changed},
                         {"unchanged", unchanged},
                         {"config_changes", config_changes(from, to)}};
  diff_replicated(from, to, diff);
  diff_arrays(from, to, same_values, diff);
  return diff;
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
    if (before.contains("xxh64") && after.contains("xxh64")) {
      out << "  xxh64 " << before["xxh64"].get<std::string>() << " -> "
          << after["xxh64"].get<std::string>() << "\n";
    } else {
      out << "  values differ\n";  // a global array: its blocks' checksums are listed with it
    }
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
