// A save into a checkpoint directory in its steps (save_checkpoint's commit
// protocol): a PendingCheckpoint under a temporary name, then the commit. The synchronous save
// runs the steps in a row; the asynchronous one runs write_data on a background thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_directory_admin.hpp"
#include "pending_checkpoint.hpp"

namespace epochrun {

class DirectorySave {
 public:
  // Collective, main thread: rank 0 creates the directory when missing and picks the temporary
  // name; the file is laid out (PendingCheckpoint::begin). `blobs` must stay valid and
  // unchanged until write_data() returns. SaveError on every rank on failure (no file left).
  static DirectorySave begin(const CheckpointDirectory& directory, const Communicator& comm,
                             const CheckpointHeader& header, std::vector<BlobView> blobs,
                             std::chrono::duration<double> timeout);

  // This rank's data: no MPI call, never throws (PendingCheckpoint::write_data).
  void write_data() noexcept { pending_->write_data(); }

  // Collective, main thread: seals the file and commits it (rank 0 renames it to its final
  // name and fsyncs the directory). SaveError on every rank on failure, the temporary file
  // removed and every committed checkpoint as it was.
  SaveStats commit();

  std::uint64_t bytes_written() const { return pending_->bytes_written(); }

 private:
  DirectorySave(std::string context, std::filesystem::path final_path, const Communicator& comm,
                std::int64_t epoch, std::chrono::duration<double> timeout);

  std::string context_;
  std::filesystem::path final_path_;
  const Communicator* comm_;
  std::int64_t epoch_;
  std::chrono::duration<double> timeout_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::optional<PendingCheckpoint> pending_;
};

}  // namespace epochrun
