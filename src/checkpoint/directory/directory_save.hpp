// A save into a checkpoint directory in its steps (save_checkpoint's commit protocol): a pending
// checkpoint under a temporary name, then the commit. Saves write format version 3
// (PendingCheckpointV3); save_checkpoint_v2 writes version 2 (PendingCheckpoint) for the tests of
// that version's readers. The synchronous save runs the steps in a row; the
// asynchronous one runs write_data on a background thread, and seal there too when MPI lets any
// thread make MPI calls (the save then runs on a communicator of its own).
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint_directory_admin.hpp"
#include "pending_checkpoint.hpp"
#include "pending_checkpoint_v3.hpp"

namespace epochrun {

class DirectorySave {
 public:
  // Collective, main thread: rank 0 creates the directory when missing and picks the temporary
  // name; the file is laid out (PendingCheckpoint::begin). `blobs` must stay valid and
  // unchanged until write_data() returns. SaveError on every rank on failure (no file left).
  static DirectorySave begin(const CheckpointDirectory& directory, const Communicator& comm,
                             const CheckpointHeader& header, std::vector<BlobView> blobs,
                             std::chrono::duration<double> timeout);
  // The same for a version 3 file (PendingCheckpointV3::begin).
  static DirectorySave begin(const CheckpointDirectory& directory, const Communicator& comm,
                             SavedFile root, std::vector<SavedBlob> blobs,
                             std::chrono::duration<double> timeout, const ArrayIoOptions& arrays,
                             bool check_replicated);

  // This rank's data: no MPI call, never throws (the pending checkpoint's write_data).
  void write_data() noexcept;

  // Collective, after write_data, on any one thread of each rank when MPI runs at
  // MPI_THREAD_MULTIPLE and no other thread uses the save's communicator meanwhile: writes the
  // global arrays (version 3) and agrees that every rank's data is complete and durable. Never
  // throws: a failure is kept for commit(), which then fails as it would have.
  void seal() noexcept;

  // Collective, main thread: seals the file unless seal() did, and commits it (rank 0 renames it
  // to its final name and fsyncs the directory). SaveError on every rank on failure, the
  // temporary file removed and every committed checkpoint as it was.
  SaveStats commit();

  // The path each global array takes (version 3 saves; none for version 2).
  std::vector<std::pair<std::string, ArrayPath>> array_paths() const;

  // Where this rank's time went so far (version 3 saves; nothing for version 2).
  SavePhases phases() const;

 private:
  DirectorySave(std::string context, std::filesystem::path final_path, const Communicator& comm,
                std::int64_t epoch, std::chrono::duration<double> timeout);

  std::string context_;
  std::filesystem::path final_path_;
  const Communicator* comm_;
  std::int64_t epoch_;
  std::chrono::duration<double> timeout_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // Rank 0 picks the temporary name everyone writes to (it creates the directory with the file).
  static std::string temporary_name(DirectorySave& save);

  // The steps of seal(): throw on failure.
  void seal_or_throw();

  std::variant<std::monostate, PendingCheckpoint, PendingCheckpointV3> pending_;
  bool sealed_ = false;            // seal() ran
  std::exception_ptr seal_error_;  // and failed so
  SavePhases phases_;              // the steps outside the pending checkpoint: naming, committing
};

}  // namespace epochrun
