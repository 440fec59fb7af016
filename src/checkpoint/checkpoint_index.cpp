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
  std::vector<std::int64_t> epochs;
  epochs.reserve(entries_.size());
  for (const auto& entry : entries_) {
    epochs.push_back(entry.first);
  }
  return epochs;
}

std::optional<std::int64_t> CheckpointIndex::latest() const {
  if (entries_.empty()) {
    return std::nullopt;
  }
  return entries_.rbegin()->first;
}

void CheckpointIndex::add(std::int64_t epoch, std::uint64_t bytes) {
  entries_[epoch] =
      json_text({{"epoch", epoch}, {"file", checkpoint_file_name(epoch)}, {"bytes", bytes}});
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
    entries_.erase(epoch);
    retired.gone.push_back(epoch);
  }
  return retired;
}

std::string CheckpointIndex::text() const {
  // The layout json_text(..., 2) gives, built from the kept entries.
  std::string text = "{\n  \"format\": \"epochrun-index\",\n  \"format_version\": 1,\n  \"job\": " +
                     json_text(job_) + ",\n  \"checkpoints\": [";
  const char* separator = "\n    ";
  for (const auto& entry : entries_) {
    text += separator;
    text += entry.second;
    separator = ",\n    ";
  }
  text += entries_.empty() ? "],\n" : "\n  ],\n";
  text += "  \"latest\": " + (entries_.empty() ? std::string("null") : std::to_string(*latest())) +
          "\n}\n";
  return text;
}

std::filesystem::path CheckpointIndex::file() const {
  return directory_.path() / kIndexFileName;
}

void CheckpointIndex::write() const {
  write_file_atomically(file(), text());
}

}  // namespace epochrun
