// Rank 0's view of the committed checkpoints of the run's directory, and index.json written
// from it. Seeded by one listing when the run starts and kept up to date by the run's own
// commits and deletions (the directory lock keeps every other run away), so that a commit
// costs the same with 10 or 3,000 epochs behind it: no listing, no stat of older files. Safe to
// use from two threads: the job's changes it while BackgroundIndex reads its text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"

namespace epochrun {

class CheckpointIndex {
 public:
  // Lists `directory` once (none when it does not exist yet).
  CheckpointIndex(CheckpointDirectory directory, std::string job);

  const CheckpointDirectory& directory() const { return directory_; }
  // Ascending.
  std::vector<std::int64_t> epochs() const;
  std::optional<std::int64_t> latest() const;

  // Records a commit of `epoch` (replacing an older file of the same epoch).
  void add(std::int64_t epoch, std::uint64_t bytes);
  struct Retired {
    std::vector<std::int64_t> gone;  // renamed away, or absent already
    std::vector<std::pair<std::int64_t, std::filesystem::path>> renamed;  // epoch, its new name
  };
  // Takes the checkpoints of `epochs` out of the directory: renames each file to a temporary
  // name (quick; the caller deletes those, see BackgroundRemoval) and forgets it. `failure`
  // gets the first error of a file that stays.
  Retired retire(const std::vector<std::int64_t>& epochs, std::optional<std::string>& failure);

  // index.json's text for the epochs known here, into `text` (whose memory is reused: a long
  // history's text is large, and fresh memory for it each time costs more than the copy). The
  // entries' text is kept from their commit, so this is one concatenation.
  void text_into(std::string& text) const;
  // index.json's path.
  std::filesystem::path file() const;

 private:
  CheckpointDirectory directory_;
  std::string job_;
  mutable std::mutex mutex_;                     // guards entries_
  std::map<std::int64_t, std::string> entries_;  // epoch -> its entry's JSON text
};

}  // namespace epochrun
