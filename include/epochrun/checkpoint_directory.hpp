// A directory of committed checkpoints, read from a single process: naming, listing and
// partial loads. (Saves and resumes are the runner's.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/export.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {

// "epoch-000005.h5": zero-padded so that `ls` sorts them; wider epochs simply get more digits.
EPOCHRUN_API std::string checkpoint_file_name(std::int64_t epoch);
// The epoch of a committed checkpoint's file name; nullopt for anything else (temporary
// files, the index, foreign files).
EPOCHRUN_API std::optional<std::int64_t> parse_checkpoint_file_name(const std::string& file_name);

// A blob to fetch in a partial load, and the name it gets in the caller's workspace.
struct BlobAddress {
  // Empty for a version 3 file's replicated blob or global array (the whole array).
  std::string node;
  std::string blob;
  std::string as;  // empty: the blob's own name
};

class EPOCHRUN_API CheckpointDirectory {
 public:
  explicit CheckpointDirectory(std::filesystem::path directory);

  const std::filesystem::path& path() const { return directory_; }
  std::filesystem::path file_for(std::int64_t epoch) const;

  // The committed epochs, ascending. A checkpoint is committed once its file carries its
  // final name: only complete, durable files are ever renamed to it. Missing directory: none.
  std::vector<std::int64_t> committed_epochs() const;
  std::optional<std::int64_t> latest_epoch() const;
  bool has_epoch(std::int64_t epoch) const;

  // Any process, any number of ranks, no collective calls: loads the chosen blobs of the
  // chosen nodes (and a version 3 file's replicated blobs and whole global arrays) into
  // `workspace`. False when the epoch has no committed checkpoint; CheckpointError when a
  // requested node or blob is not in it.
  bool load_blobs(std::int64_t epoch, const std::vector<BlobAddress>& wanted,
                  Workspace& workspace) const;

  // The message for a missing epoch, naming the epochs that exist.
  std::string describe_missing(std::int64_t epoch) const;

 private:
  std::filesystem::path directory_;
};

}  // namespace epochrun
