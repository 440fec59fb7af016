#include "checkpoint_index.hpp"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint_directory_admin.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "json_text.hpp"

namespace epochrun {

CheckpointIndex::CheckpointIndex(CheckpointDirectory directory, std::string job)
    : directory_(std::move(directory)), job_(std::move(job)) {
  for (auto epoch : directory_.committed_epochs()) {
    std::error_code ignored;
    add(epoch, std::filesystem::file_size(directory_.file_for(epoch), ignored));
  }
}

std::vector<std::int64_t> CheckpointIndex::epochs() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::int64_t> epochs;
  epochs.reserve(entries_.size());
  for (const auto& entry : entries_) {
    epochs.push_back(entry.first);
  }
  return epochs;
}

std::optional<std::int64_t> CheckpointIndex::latest() const {
  const std::lock_guard lock(mutex_);
  if (entries_.empty()) {
    return std::nullopt;
  }
  return entries_.rbegin()->first;
}

void CheckpointIndex::add(std::int64_t epoch, std::uint64_t bytes) {
  auto entry =
      json_text({{"epoch", epoch}, {"file", checkpoint_file_name(epoch)}, {"bytes", bytes}});
  const std::lock_guard lock(mutex_);
  entries_[epoch] = std::move(entry);
}

CheckpointIndex::Retired CheckpointIndex::retire(const std::vector<std::int64_t>& epochs,
                                                 std::optional<std::string>& failure) {
  Retired retired;
  for (auto epoch : epochs) {
    const auto file = directory_.file_for(epoch);
    auto temporary = temporary_sibling(file);
    if (::rename(file.c_str(), temporary.c_str()) == 0) {
      retired.renamed.emplace_back(epoch, std::move(temporary));
    } else if (errno != ENOENT) {
      // A file that could not be retired stays committed.
      failure = failure.value_or(errno_message("delete " + file.string()));
      continue;
    }
    const std::lock_guard lock(mutex_);
    entries_.erase(epoch);
    retired.gone.push_back(epoch);
  }
  return retired;
}

void CheckpointIndex::text_into(std::string& text) const {
  const std::lock_guard lock(mutex_);
  // The layout json_text(..., 2) gives, built from the kept entries.
  text.assign("{\n  \"format\": \"epochrun-index\",\n  \"format_version\": 1,\n  \"job\": ");
  text += json_text(job_);
  text += ",\n  \"checkpoints\": [";
  const char* separator = "\n    ";
  for (const auto& entry : entries_) {
    text += separator;
    text += entry.second;
    separator = ",\n    ";
  }
  text += entries_.empty() ? "],\n" : "\n  ],\n";
  text += "  \"latest\": ";
  text += entries_.empty() ? std::string("null") : std::to_string(entries_.rbegin()->first);
  text += "\n}\n";
}

std::filesystem::path CheckpointIndex::file() const {
  return directory_.path() / kIndexFileName;
}

}  // namespace epochrun
