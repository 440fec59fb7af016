#include "epochrun/uploader.hpp"

#include "durable_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"

namespace epochrun {

Uploader::~Uploader() = default;

DirectoryUploader::DirectoryUploader(std::filesystem::path directory)
    : directory_(std::move(directory)) {
  if (directory_.empty()) {
    throw UsageError("upload directory must not be empty");
  }
}

std::string DirectoryUploader::upload(const std::filesystem::path& file) {
  // Only the file name is kept, so the copy can never land outside the upload directory.
  const auto target = directory_ / file.filename();
  try {
    create_private_directories(directory_);
    // Of an upload that was killed part-way: only checkpoints are uploaded.
    remove_stale_temporaries(directory_, [](const std::string& name) {
      return parse_checkpoint_file_name(name).has_value();
    });
    const auto epoch = parse_checkpoint_file_name(file.filename().string()).value_or(-1);
    copy_file_atomically(file, target, [epoch] { fault_point("upload", epoch); });
  } catch (const std::exception& error) {
    throw Error("upload " + file.string() + " to " + directory_.string() + ": " + error.what());
  }
  return target.string();
}

std::unique_ptr<Uploader> make_uploader(const std::string& destination) {
  const std::string file_scheme = "file://";
  if (destination.starts_with(file_scheme)) {
    return std::make_unique<DirectoryUploader>(destination.substr(file_scheme.size()));
  }
  auto scheme_end = destination.find("://");
  if (scheme_end != std::string::npos) {
    throw UsageError("unsupported upload destination '" + destination +
                     "' (supported: a directory path or file://DIR)");
  }
  return std::make_unique<DirectoryUploader>(destination);
}

}  // namespace epochrun
