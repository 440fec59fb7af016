#include "config_changes.hpp"

#include <algorithm>
#include <set>

#include "epochrun/errors.hpp"
#include "json_text.hpp"

namespace epochrun {

std::vector<ConfigChange> job_config_changes(const std::string& job_name,
                                             const std::string& stored_json,
                                             const std::string& current_json) {
  const auto stored = nlohmann::json::parse(stored_json, nullptr, false);
  const auto current = nlohmann::json::parse(current_json, nullptr, false);
  const std::string prefix = job_name + ".";
  std::set<std::string> keys;
  for (const auto* config : {&stored, &current}) {
    if (!config->is_object()) {
      continue;
    }
    for (const auto& [key, value] : config->items()) {
      if (key.rfind(prefix, 0) == 0) {
        keys.insert(key);
      }
    }
  }
  auto value_of = [](const nlohmann::json& config, const std::string& key) {
    return config.is_object() && config.contains(key) ? config.at(key) : nlohmann::json(nullptr);
  };
  std::vector<ConfigChange> changes;
  for (const auto& key : keys) {
    auto old_value = value_of(stored, key);
    auto new_value = value_of(current, key);
    if (old_value != new_value) {
      changes.push_back(ConfigChange{key, json_text(old_value), json_text(new_value)});
    }
  }
  return changes;
}

void refuse_run_defining_changes(const Job& job, const std::vector<ConfigChange>& changes,
                                 const std::vector<std::string>& allowed, std::int64_t epoch) {
  for (const auto& change : changes) {
    const auto option = change.key.substr(job.name().size() + 1);
    const auto& defining = job.run_defining_options();
    if (std::find(defining.begin(), defining.end(), option) == defining.end() ||
        std::find(allowed.begin(), allowed.end(), change.key) != allowed.end()) {
      continue;
    }
    throw CheckpointMismatch("the checkpoint of epoch " + std::to_string(epoch) +
                             " was written with --" + change.key + " " + change.old_json +
                             ", this run has " + change.new_json +
                             ": that option defines the run, and resuming with another value "
                             "would mix two runs (--allow-config-change " +
                             change.key + " resumes anyway)");
  }
}

}  // namespace epochrun
