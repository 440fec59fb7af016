// The shared file in the checkpoint directory as a level of a save (checkpoint_level.hpp): the
// file laid out in begin (DirectorySave::begin, format version 3), this rank's data written in
// finish, on the job's thread or, later, on a thread of the save's own, and committed by commit
// (DirectorySave::commit: sealed unless the thread sealed it, renamed, the directory fsynced).
// Internal to the library.
//
// When MPI lets any thread make MPI calls (MPI_THREAD_MULTIPLE, on every rank), the thread also
// writes the global arrays with their collective MPI-IO writes and seals the file, on a
// communicator of the saves' own, so that the job's MPI calls meanwhile never meet the save's;
// commit then only commits it. Otherwise commit seals it on the job's thread (the whole
// collective write at the next epoch boundary).
#pragma once

#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint_level.hpp"
#include "checkpoint_options.hpp"
#include "directory_save.hpp"
#include "epochrun/communicator.hpp"

namespace epochrun {

class SharedFileLevel final : public CheckpointLevel {
 public:
  // Collective: agrees whether the thread of a later save may seal the file.
  SharedFileLevel(std::string job, const Communicator& comm, const CheckpointOptions& options,
                  std::vector<std::string> node_names);
  // A write still in flight belongs to a run that failed: its thread is joined and its
  // temporary file removed (PendingCheckpointV3), nothing is committed.
  ~SharedFileLevel() override;
  SharedFileLevel(const SharedFileLevel&) = delete;
  SharedFileLevel& operator=(const SharedFileLevel&) = delete;

  // Lays the file out; returns no views (no level follows).
  std::optional<std::vector<SavedBlob>> begin(std::int64_t epoch, std::vector<SavedBlob> blobs,
                                              const SaveRoute& route,
                                              SaveOutcome& outcome) override;
  void finish(bool later) override;
  // Commits the file; committed_file() then describes it.
  void commit(SaveOutcome& outcome) override;
  // Forgets the file of this checkpoint (removed by then unless committed).
  void done(bool committed) override;

  // Whether a file is laid out and not yet committed or failed.
  bool in_flight() const { return save_.has_value(); }
  const SaveStats& committed_file() const { return stats_; }

 private:
  // Records in `outcome` the paths the file's global arrays are written by; rank 0 logs them
  // when they are not the ones it logged last (the first save of the run, or a change).
  void note_array_paths(SaveOutcome& outcome);

  std::string job_;
  const Communicator& comm_;
  const CheckpointOptions& options_;
  std::vector<std::string> node_names_;
  // The later saves' own duplicate of comm_, when they seal on their thread.
  std::optional<Communicator> background_comm_;
  std::optional<DirectorySave> save_;
  std::thread writer_;  // runs save_->write_data() (and seal) beside the job
  SaveStats stats_;
  std::vector<std::pair<std::string, ArrayPath>> logged_array_paths_;
};

}  // namespace epochrun
