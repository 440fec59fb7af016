#include "directory_save.hpp"

#include <unistd.h>

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

DirectorySave DirectorySave::begin(const CheckpointDirectory& directory, const Communicator& comm,
                                   const CheckpointHeader& header, std::vector<BlobView> blobs,
                                   std::chrono::duration<double> timeout) {
  DirectorySave save("save epoch " + std::to_string(header.epoch), directory.file_for(header.epoch),
                     comm, header.epoch, timeout);
  // Rank 0 prepares the directory and picks the temporary name everyone writes to.
  std::string temporary;
  run_on_root_then_agree_within(comm, save.context_, timeout, [&] {
    create_private_directories(directory.path());
    temporary = temporary_sibling(save.final_path_).string();
  });
  comm.broadcast(temporary);
  try {
    save.pending_.emplace(
        PendingCheckpoint::begin(temporary, comm, header, std::move(blobs), timeout));
  } catch (const std::exception& failure) {
    throw SaveError(save.context_ + ": " + failure.what());
  }
  return save;
}

SaveStats DirectorySave::commit() {
  const auto temporary = pending_->file();
  try {
    // Complete, sealed and fsynced on every rank when it returns.
    pending_->finish();
    fault_point("save-before-rename", epoch_);
    // The commit point: rank 0 renames the complete, durable file to its final name
    // (atomically replacing an older file of the same epoch) and makes the rename durable.
    run_on_root_then_agree_within(*comm_, context_ + ": commit", timeout_,
                                  [&] { rename_durably(temporary, final_path_); });
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
