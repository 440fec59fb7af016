#include "checkpoint_directory_admin.hpp"

#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "checkpoint_layout.hpp"
#include "checkpoint_load_v3.hpp"
#include "collective_errors.hpp"
#include "directory_save.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"
#include "integrity_header.hpp"
#include "local_copy_load.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

constexpr char kPrefix[] = "epoch-";
constexpr char kSuffix[] = ".h5";

std::string join_epochs(const std::vector<std::int64_t>& epochs) {
  std::string text;
  for (auto epoch : epochs) {
    text += (text.empty() ? "" : ", ") + std::to_string(epoch);
  }
  return text;
}

}  // namespace

std::string checkpoint_file_name(std::int64_t epoch) {
  if (epoch < 0) {
    throw UsageError("epoch must not be negative, got " + std::to_string(epoch));
  }
  char digits[32];
  std::snprintf(digits, sizeof digits, "%06lld", static_cast<long long>(epoch));
  return kPrefix + std::string(digits) + kSuffix;
}

std::optional<std::int64_t> parse_checkpoint_file_name(const std::string& file_name) {
  const std::string prefix = kPrefix;
  const std::string suffix = kSuffix;
  if (file_name.size() <= prefix.size() + suffix.size() || !file_name.starts_with(prefix) ||
      !file_name.ends_with(suffix)) {
    return std::nullopt;
  }
  auto digits = file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  if (digits.size() < 6 || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  auto epoch = std::stoll(digits);
  // Only the canonical spelling counts, so one epoch never has two files.
  if (checkpoint_file_name(epoch) != file_name) {
    return std::nullopt;
  }
  return epoch;
}

CheckpointDirectory::CheckpointDirectory(std::filesystem::path directory)
    : directory_(std::move(directory)) {}

std::filesystem::path CheckpointDirectory::file_for(std::int64_t epoch) const {
  return directory_ / checkpoint_file_name(epoch);
}

std::vector<std::int64_t> CheckpointDirectory::committed_epochs() const {
  std::vector<std::int64_t> epochs;
  std::error_code error;
  std::filesystem::directory_iterator entries(directory_, error);
  if (error) {
    return epochs;
  }
  for (const auto& entry : entries) {
    auto epoch = parse_checkpoint_file_name(entry.path().filename().string());
    // A symlink or directory under a checkpoint's name is never taken for a checkpoint (the
    // symlink test comes first: following a symlink loop would fail).
    if (epoch && !entry.is_symlink(error) && entry.is_regular_file(error)) {
      epochs.push_back(*epoch);
    }
  }
  std::sort(epochs.begin(), epochs.end());
  return epochs;
}

std::optional<std::int64_t> CheckpointDirectory::latest_epoch() const {
  auto epochs = committed_epochs();
  if (epochs.empty()) {
    return std::nullopt;
  }
  return epochs.back();
}

bool CheckpointDirectory::has_epoch(std::int64_t epoch) const {
  // What committed_epochs() would list of this epoch, with one lstat instead of reading the
  // whole directory (a load asks this first): its exact name, a regular file, not a symlink.
  std::error_code error;
  return epoch >= 0 && parse_checkpoint_file_name(checkpoint_file_name(epoch)) == epoch &&
         std::filesystem::symlink_status(file_for(epoch), error).type() ==
             std::filesystem::file_type::regular;
}

std::string CheckpointDirectory::describe_missing(std::int64_t epoch) const {
  auto epochs = committed_epochs();
  return "no committed checkpoint for epoch " + std::to_string(epoch) + " in " +
         directory_.string() +
         (epochs.empty() ? " (it holds none)" : " (committed epochs: " + join_epochs(epochs) + ")");
}

namespace {

// The committed file of `epoch` (`file`), open for a load's rank 0 with one open(2), where
// has_epoch's lstat and then an open were two on the load's serial path (every other rank
// waits for it). What has_epoch does not take for a committed checkpoint (no such file, a
// symlink, a directory or FIFO under its name, a name that is not the canonical one) is
// CheckpointNotFound naming the committed epochs, as before; any other failure to open (a
// file rank 0 may not read) is the open's error, with the file's name before it.
FileDescriptor open_committed(const CheckpointDirectory& directory, std::int64_t epoch,
                              const std::filesystem::path& file) {
  if (parse_checkpoint_file_name(file.filename().string()) != epoch) {
    throw CheckpointNotFound(directory.describe_missing(epoch));
  }
  try {
    return open_regular_file_for_reading(file);
  } catch (const CheckpointError&) {
    // Only on a failure: has_epoch decides, as it decided before the open.
    if (!directory.has_epoch(epoch)) {
      throw CheckpointNotFound(directory.describe_missing(epoch));
    }
    rethrow_with_context(std::current_exception(), "checkpoint " + file.string());
  }
}

}  // namespace

bool CheckpointDirectory::load_blobs(std::int64_t epoch, const std::vector<BlobAddress>& wanted,
                                     Workspace& workspace) const {
  if (!has_epoch(epoch)) {
    return false;
  }
  CheckpointReader reader(file_for(epoch));
  // Read everything first so that a missing blob leaves the workspace untouched.
  std::vector<std::pair<std::string, Blob>> loaded;
  for (const auto& address : wanted) {
    // No node: a version 3 file's replicated blob, or global array read whole.
    const bool replicated =
        address.node.empty() &&
        std::any_of(reader.header().replicated.begin(), reader.header().replicated.end(),
                    [&](const BlobRecord& r) { return r.name == address.blob; });
    loaded.emplace_back(address.as.empty() ? address.blob : address.as,
                        !address.node.empty() ? reader.read_blob(address.node, address.blob)
                        : replicated          ? reader.read_replicated(address.blob)
                                              : reader.read_array(address.blob));
  }
  for (auto& [name, blob] : loaded) {
    workspace.put(name, std::move(blob));
  }
  return true;
}

SaveStats save_checkpoint(const CheckpointDirectory& directory, const Communicator& comm,
                          const CheckpointHeader& header, const Workspace& workspace,
                          const std::vector<std::string>& blob_names,
                          std::chrono::duration<double> timeout) {
  std::vector<SavedBlob> blobs;
  for (auto& view : blob_views(workspace, blob_names)) {
    blobs.push_back(SavedBlob{std::move(view), StorageKind::kPerNode, {}, {}});
  }
  auto save = DirectorySave::begin(
      directory, comm, SavedFile{header.epoch, header.job, header.node_names, header.config_json},
      std::move(blobs), timeout, {}, false);
  save.write_data();
  return save.commit();
}

SaveStats save_checkpoint_v2(const CheckpointDirectory& directory, const Communicator& comm,
                             const CheckpointHeader& header, const Workspace& workspace,
                             const std::vector<std::string>& blob_names,
                             std::chrono::duration<double> timeout) {
  auto save =
      DirectorySave::begin(directory, comm, header, blob_views(workspace, blob_names), timeout);
  save.write_data();
  return save.commit();
}

Loaded load_checkpoint(const CheckpointDirectory& directory, const Communicator& comm,
                       const LoadRequest& request, Workspace& workspace,
                       std::chrono::duration<double> timeout) {
  const auto file = directory.file_for(request.epoch);
  // One step of rank 0 and its agreement: it finds the file, verifies its integrity header and
  // reads its layout (a version 3 file's from its layout record, without an HDF5 open), and the
  // layout's size (0: a file of version 1 or 2) and, for a small job, the layout itself travel
  // with its outcome; a larger layout follows in one broadcast.
  RootLayout root;
  std::optional<StoredFileV3> stored;
  // Rank 0's descriptor of the file: it reads its own values through the one it read the layout
  // with, not through a second open.
  FileDescriptor opened(-1);
  {
    const step_times::Named step("find the file, read the layout");
    run_on_root_then_agree_within(
        comm, "load epoch " + std::to_string(request.epoch), timeout,
        [&] {
          opened = open_committed(directory, request.epoch, file);
          std::int64_t version = 0;
          read_layout_for_load(opened.get(), file, request, comm.size(), version, root);
        },
        std::span(root.carried));
    stored = share_layout(comm, root);
  }
  if (stored) {
    // The node-local copies of the epoch, when every rank of the run that wrote it has a whole
    // one that matches the file's checksums, are read instead of the shared file.
    if (!request.local_dir.empty() &&
        stored->description.ranks() == static_cast<std::uint64_t>(comm.size())) {
      const step_times::Named step("read the node-local copies");
      if (auto copied = load_local_copies(request.local_dir, *stored, request, comm, timeout)) {
        auto loaded = put_loaded_values(std::move(*copied), *stored, workspace);
        loaded.from_local_copies = true;
        return loaded;
      }
    }
    return load_values_v3(file, comm, request, workspace, timeout, *stored, std::move(opened));
  }
  Loaded loaded;
  loaded.blobs = read_checkpoint_file(
      file, comm, CheckpointExpectation{request.epoch, request.job, request.node_names}, workspace,
      timeout);
  loaded.written_by_ranks = comm.size();
  run_on_root_then_agree_within(comm, "load epoch " + std::to_string(request.epoch), timeout, [&] {
    loaded.config_json = CheckpointReader(file).header().config_json;
  });
  return loaded;
}

std::vector<std::string> load_checkpoint(const CheckpointDirectory& directory,
                                         const Communicator& comm,
                                         const CheckpointExpectation& expected,
                                         Workspace& workspace,
                                         std::chrono::duration<double> timeout) {
  return load_checkpoint(
             directory, comm,
             LoadRequest{expected.epoch, expected.job, expected.node_names, {}, {}, {}, {}},
             workspace, timeout)
      .blobs;
}

void remove_checkpoints(const CheckpointDirectory& directory,
                        const std::vector<std::int64_t>& epochs) {
  std::optional<std::string> first_failure;
  for (auto epoch : epochs) {
    const auto file = directory.file_for(epoch);
    if (::unlink(file.c_str()) != 0 && errno != ENOENT && !first_failure) {
      first_failure = errno_message("delete " + file.string());
    }
  }
  if (!epochs.empty()) {
    fsync_directory(directory.path());
  }
  if (first_failure) {
    throw Error(*first_failure);
  }
}

int remove_stale_checkpoint_temporaries(const CheckpointDirectory& directory) {
  return remove_stale_temporaries(directory.path(), [](const std::string& name) {
    return parse_checkpoint_file_name(name).has_value() || name == kIndexFileName;
  });
}

}  // namespace epochrun
