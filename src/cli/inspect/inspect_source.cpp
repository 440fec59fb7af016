#include "inspect/inspect_source.hpp"

#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// "N" (a non-negative epoch number) or "latest" (nullopt): what --resume-from-epoch takes.
std::optional<std::int64_t> parse_epoch_spec(const std::string& spec) {
  try {
    const auto request = ResumeRequest::parse(spec);
    return request.kind == ResumeRequest::Kind::kLatest ? std::nullopt
                                                        : std::optional(request.epoch);
  } catch (const UsageError&) {
    throw UsageError("invalid epoch '" + spec +
                     "': expected a non-negative epoch number or 'latest'");
  }
}

}  // namespace

CheckpointReader open_checkpoint(const CheckpointChoice& choice) {
  CheckpointReader reader(choice.file);
  const auto recorded = reader.header().epoch;
  if (choice.epoch && recorded != *choice.epoch) {
    throw CorruptCheckpoint("checkpoint " + choice.file.string() + " records epoch " +
                            std::to_string(recorded));
  }
  return reader;
}

InspectSource::InspectSource(const fs::path& path) : path_(path) {
  std::error_code error;  // a symlink loop, for one, is the user's to fix: a usage error
  const auto status = fs::status(path, error);
  if (fs::is_directory(status)) {
    directory_.emplace(path);
  } else if (!fs::is_regular_file(status)) {
    throw UsageError("'" + path.string() + "' is not a directory or a checkpoint file" +
                     (error ? " (" + error.message() + ")" : ""));
  }
}

std::vector<CheckpointChoice> InspectSource::all() const {
  if (is_file()) {
    return {{path_, std::nullopt}};
  }
  std::vector<CheckpointChoice> choices;
  for (auto epoch : directory_->committed_epochs()) {
    choices.push_back({directory_->file_for(epoch), epoch});
  }
  return choices;
}

CheckpointChoice InspectSource::choose(const std::string& spec) const {
  const auto epoch = spec.empty() ? std::nullopt : parse_epoch_spec(spec);
  if (is_file()) {
    if (epoch) {
      throw UsageError("--epoch " + spec + ": '" + path_.string() +
                       "' is one checkpoint file; give its directory to choose an epoch");
    }
    return {path_, std::nullopt};
  }
  if (!epoch) {
    const auto latest = directory_->latest_epoch();
    if (!latest) {
      throw CheckpointNotFound("no committed checkpoint in " + path_.string());
    }
    return {directory_->file_for(*latest), *latest};
  }
  if (!directory_->has_epoch(*epoch)) {
    throw CheckpointNotFound(directory_->describe_missing(*epoch));
  }
  return {directory_->file_for(*epoch), *epoch};
}

}  // namespace epochrun::cli
