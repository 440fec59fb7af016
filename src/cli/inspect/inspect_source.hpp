// What `epochrun inspect PATH` looks at: a checkpoint directory or one checkpoint file, and
// which of its checkpoints an `--epoch N|latest` names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"

namespace epochrun::cli {

// One checkpoint to read: its file, and its epoch when the directory's file name gives it (a
// single file given by path has only the epoch its header records).
struct CheckpointChoice {
  std::filesystem::path file;
  std::optional<std::int64_t> epoch;
};

// Opens the chosen checkpoint (CheckpointReader: integrity header and layout checked) and
// checks that it records the epoch its file name says (CorruptCheckpoint otherwise).
CheckpointReader open_checkpoint(const CheckpointChoice& choice);

class InspectSource {
 public:
  // A directory, or a file (any name: a copied or renamed checkpoint is still one). Throws
  // UsageError for anything else, and for a path that cannot be a directory (a symlink loop).
  explicit InspectSource(const std::filesystem::path& path);

  bool is_file() const { return !directory_; }
  const std::filesystem::path& path() const { return path_; }
  const CheckpointDirectory& directory() const { return *directory_; }

  // Every committed checkpoint, oldest first (the file alone for a file).
  std::vector<CheckpointChoice> all() const;
  // The checkpoint `spec` ("N" or "latest") names. For a directory: the committed epoch N, or
  // the newest committed one (CheckpointNotFound naming the epochs there are). For a file: the
  // file itself when `spec` is empty or "latest"; an epoch number is a UsageError (a file
  // holds the one epoch it holds).
  CheckpointChoice choose(const std::string& spec) const;

 private:
  std::filesystem::path path_;
  std::optional<CheckpointDirectory> directory_;
};

}  // namespace epochrun::cli
