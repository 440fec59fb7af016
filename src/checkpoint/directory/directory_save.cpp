#include "directory_save.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "fault_injection.hpp"
#include "seconds_since.hpp"

namespace epochrun {

DirectorySave::DirectorySave(std::string context, std::filesystem::path final_path,
                             const Communicator& comm, std::int64_t epoch,
                             std::chrono::duration<double> timeout)
    : context_(std::move(context)),
      final_path_(std::move(final_path)),
      comm_(&comm),
      epoch_(epoch),
      timeout_(timeout) {}

std::string DirectorySave::temporary_name(DirectorySave& save) {
  const PhaseTimer timer(save.phases_, SavePhase::kDescribe);
  // Only a name (rank 0 creates the directory with the file, in the lay-out step), in one
  // broadcast of a fixed size: a file name fits NAME_MAX (255 bytes), and this one, the
  // checkpoint's name and a pid and 16 hex digits, fits it by far.
  std::array<std::uint8_t, 256> name{};
  if (save.comm_->is_root()) {
    const auto picked = temporary_sibling(save.final_path_).filename().string();
    std::memcpy(name.data(), picked.data(), std::min(picked.size(), name.size() - 1));
  }
  save.comm_->broadcast(std::span(name));
  return (save.final_path_.parent_path() / reinterpret_cast<const char*>(name.data())).string();
}

DirectorySave DirectorySave::begin(const CheckpointDirectory& directory, const Communicator& comm,
                                   const CheckpointHeader& header, std::vector<BlobView> blobs,
                                   std::chrono::duration<double> timeout) {
  DirectorySave save("save epoch " + std::to_string(header.epoch), directory.file_for(header.epoch),
                     comm, header.epoch, timeout);
  const auto temporary = temporary_name(save);
  try {
    save.pending_.emplace<PendingCheckpoint>(
        PendingCheckpoint::begin(temporary, comm, header, std::move(blobs), timeout));
  } catch (const std::exception& failure) {
    throw SaveError(save.context_ + ": " + failure.what());
  }
  return save;
}

DirectorySave DirectorySave::begin(const CheckpointDirectory& directory, const Communicator& comm,
                                   SavedFile root, std::vector<SavedBlob> blobs,
                                   std::chrono::duration<double> timeout,
                                   const ArrayIoOptions& arrays, bool check_replicated) {
  const auto epoch = root.epoch;
  DirectorySave save("save epoch " + std::to_string(epoch), directory.file_for(epoch), comm, epoch,
                     timeout);
  try {
    // Rank 0 names the temporary file as it creates it, and sends the name with the layout:
    // no broadcast of its own.
    save.pending_.emplace<PendingCheckpointV3>(PendingCheckpointV3::begin(
        save.final_path_, comm, std::move(root), std::move(blobs), timeout, arrays,
        check_replicated, PendingCheckpointV3::FileName::kTemporarySibling));
  } catch (const std::exception& failure) {
    throw SaveError(save.context_ + ": " + failure.what());
  }
  return save;
}

void DirectorySave::write_data() noexcept {
  if (auto* v2 = std::get_if<PendingCheckpoint>(&pending_)) {
    v2->write_data();
  } else if (auto* v3 = std::get_if<PendingCheckpointV3>(&pending_)) {
    v3->write_data();
  }
}

std::vector<std::pair<std::string, ArrayPath>> DirectorySave::array_paths() const {
  if (const auto* v3 = std::get_if<PendingCheckpointV3>(&pending_)) {
    return v3->array_paths();
  }
  return {};
}

SavePhases DirectorySave::phases() const {
  auto phases = phases_;
  if (const auto* v3 = std::get_if<PendingCheckpointV3>(&pending_)) {
    phases += v3->phases();
  }
  return phases;
}

void DirectorySave::seal_or_throw() {
  // Complete, sealed and fsynced on every rank when it returns.
  if (auto* v2 = std::get_if<PendingCheckpoint>(&pending_)) {
    v2->finish();
  } else if (auto* v3 = std::get_if<PendingCheckpointV3>(&pending_)) {
    v3->write_arrays();
    v3->finish();
  }
}

void DirectorySave::seal() noexcept {
  sealed_ = true;
  try {
    seal_or_throw();
  } catch (...) {
    seal_error_ = std::current_exception();
  }
}

SaveStats DirectorySave::commit() {
  auto* v2 = std::get_if<PendingCheckpoint>(&pending_);
  auto* v3 = std::get_if<PendingCheckpointV3>(&pending_);
  const auto temporary = v2 != nullptr ? v2->file() : v3->file();
  try {
    if (!sealed_) {
      seal_or_throw();
    } else if (seal_error_) {
      std::rethrow_exception(seal_error_);
    }
    fault_point("save-before-rename", epoch_);
    // The commit point: rank 0 renames the complete, durable file to its final name
    // (atomically replacing an older file of the same epoch) and makes the rename durable.
    // First it makes every host's cached copy old, now that every rank's bytes are in it: its
    // own host's (which read back parts of the file while laying it out, before the other
    // ranks wrote there) and the other hosts', which otherwise serve the content of the moment
    // they cached it (GlusterFS: for about a second on rank 0's host, for minutes on another).
    timed_step(
        phases_, SavePhase::kCommit,
        [&](auto&& step) {
          run_on_root_then_agree_within(*comm_, context_ + ": commit", timeout_, step);
        },
        [&] {
          invalidate_cached_copies(temporary);
          rename_durably(temporary, final_path_);
        });
  } catch (const std::exception& failure) {
    if (comm_->is_root()) {
      ::unlink(temporary.c_str());  // gives the space of a failed attempt back
    }
    throw SaveError(context_ + ": " + failure.what());
  }
  fault_point("save-after-rename", epoch_);
  SaveStats stats;
  stats.file = final_path_;
  std::error_code ignored;
  stats.file_bytes = std::filesystem::file_size(final_path_, ignored);
  stats.seconds = seconds_since(started_);
  return stats;
}

}  // namespace epochrun
