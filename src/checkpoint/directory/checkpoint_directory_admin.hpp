// The runner's side of a checkpoint directory: collective saves and loads under the atomic
// commit protocol, and rank 0's deletions. The single-process read side (naming, listing,
// partial loads) is public: CheckpointDirectory, <epochrun/checkpoint_directory.hpp>.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint_file_collective.hpp"
#include "checkpoint_load_v3.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// The runner's index of the directory's checkpoints (checkpoint_index.hpp).
inline constexpr const char* kIndexFileName = "index.json";

struct SaveStats {
  std::filesystem::path file;
  std::uint64_t file_bytes = 0;
  double seconds = 0;
};

// Collective. The commit protocol: write under a temporary name (mode 0644 from its creation),
// fsync on every rank, rename to the final name (atomically replacing an older file of the same
// epoch), fsync the directory. (index.json is the caller's: the runner's post-commit steps.)
// Creates the directory when missing. On any failure throws SaveError on every rank, removes the
// temporary file and leaves every committed checkpoint as it was. A rank that waits more than
// `timeout` for the others at any step aborts the job (see raise_if_any_failed_within).
// Writes format version 3, every blob per node (the runner's saves are the same, with the
// kinds of blob the job declares).
SaveStats save_checkpoint(const CheckpointDirectory& directory, const Communicator& comm,
                          const CheckpointHeader& header, const Workspace& workspace,
                          const std::vector<std::string>& blob_names,
                          std::chrono::duration<double> timeout = kDefaultSaveTimeout);
// The same in format version 2, for the tests of that version's readers.
SaveStats save_checkpoint_v2(const CheckpointDirectory& directory, const Communicator& comm,
                             const CheckpointHeader& header, const Workspace& workspace,
                             const std::vector<std::string>& blob_names,
                             std::chrono::duration<double> timeout = kDefaultSaveTimeout);

// Collective. Loads the epoch `request` names into `workspace`, of any format version: version 3
// at any rank count (load_checkpoint_v3), versions 1 and 2 at the rank count that wrote them
// (read_checkpoint_file). CheckpointNotFound, naming the committed epochs, when it is absent.
Loaded load_checkpoint(const CheckpointDirectory& directory, const Communicator& comm,
                       const LoadRequest& request, Workspace& workspace,
                       std::chrono::duration<double> timeout = kDefaultSaveTimeout);
// The same at the rank count that wrote it, global arrays in balanced blocks; returns the loaded
// blob names.
std::vector<std::string> load_checkpoint(
    const CheckpointDirectory& directory, const Communicator& comm,
    const CheckpointExpectation& expected, Workspace& workspace,
    std::chrono::duration<double> timeout = kDefaultSaveTimeout);

// Deletes committed checkpoints and makes the deletions durable with one directory fsync (rank 0
// only). Throws Error naming the first file that could not be deleted, after syncing the
// deletions that did happen.
void remove_checkpoints(const CheckpointDirectory& directory,
                        const std::vector<std::int64_t>& epochs);

// Deletes what an interrupted save or index update left in the directory (rank 0 only):
// temporary files named exactly as epochrun names them for a checkpoint or the index, nothing
// else. Returns how many.
int remove_stale_checkpoint_temporaries(const CheckpointDirectory& directory);

}  // namespace epochrun
