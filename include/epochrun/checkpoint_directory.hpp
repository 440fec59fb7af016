// A directory of committed checkpoints: naming, listing, the atomic commit protocol, loads
// and partial loads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// "epoch-000005.h5": zero-padded so that `ls` sorts them; wider epochs simply get more digits.
std::string checkpoint_file_name(std::int64_t epoch);
// The epoch of a committed checkpoint's file name; nullopt for anything else (temporary
// files, the index, foreign files).
std::optional<std::int64_t> parse_checkpoint_file_name(const std::string& file_name);

inline constexpr const char* kIndexFileName = "index.json";

struct SaveStats {
  std::filesystem::path file;
  std::uint64_t file_bytes = 0;
  double seconds = 0;
};

// A blob to fetch in a partial load, and the name it gets in the caller's workspace.
struct BlobAddress {
  std::string node;
  std::string blob;
  std::string as;  // empty: the blob's own name
};

class CheckpointDirectory {
 public:
  explicit CheckpointDirectory(std::filesystem::path directory);

  const std::filesystem::path& path() const { return directory_; }
  std::filesystem::path file_for(std::int64_t epoch) const;

  // The committed epochs, ascending. A checkpoint is committed once its file carries its
  // final name: only complete, durable files are ever renamed to it. Missing directory: none.
  std::vector<std::int64_t> committed_epochs() const;
  std::optional<std::int64_t> latest_epoch() const;
  bool has_epoch(std::int64_t epoch) const;

  // Collective. The commit protocol: write under a temporary name (mode 0644 from its
  // creation), fsync on every rank, rename to the final name (atomically replacing an older
  // file of the same epoch), fsync the directory. (index.json is the caller's: the runner's
  // post-commit steps.) Creates the directory when missing. On any failure throws SaveError on
  // every rank, removes the temporary file and leaves every committed checkpoint as it was. A rank
  // that waits more than `timeout` for the others at any step aborts the job (see
  // write_checkpoint_file).
  SaveStats save(const Communicator& comm, const CheckpointHeader& header,
                 const Workspace& workspace, const std::vector<std::string>& blob_names,
                 std::chrono::duration<double> timeout = kDefaultSaveTimeout) const;

  // Collective. Loads the epoch into `workspace` (see read_checkpoint_file); returns the
  // loaded blob names. CheckpointNotFound, naming the committed epochs, when it is absent.
  std::vector<std::string> load(const Communicator& comm, const CheckpointExpectation& expected,
                                Workspace& workspace,
                                std::chrono::duration<double> timeout = kDefaultSaveTimeout) const;

  // Any process, any number of ranks, no collective calls: loads the chosen blobs of the
  // chosen nodes into `workspace`. False when the epoch has no committed checkpoint;
  // CheckpointError when a requested node or blob is not in it.
  bool load_blobs(std::int64_t epoch, const std::vector<BlobAddress>& wanted,
                  Workspace& workspace) const;

  // Deletes committed checkpoints and makes the deletions durable with one directory fsync
  // (rank 0 only). Throws Error naming the first file that could not be deleted, after
  // syncing the deletions that did happen.
  void remove(const std::vector<std::int64_t>& epochs) const;

  // Deletes what an interrupted save or index update left here (rank 0 only): temporary
  // files named exactly as epochrun names them for a checkpoint or the index, nothing else.
  // Returns how many.
  int remove_stale_temporaries() const;

  // The message for a missing epoch, naming the epochs that exist.
  std::string describe_missing(std::int64_t epoch) const;

 private:
  std::filesystem::path directory_;
};

}  // namespace epochrun
