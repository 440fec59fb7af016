// Which committed checkpoints to keep: the newest K, every Nth epoch as a snapshot, or all.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "epochrun/export.hpp"

namespace epochrun {

struct EPOCHRUN_API RetentionPolicy {
  std::optional<std::int64_t> keep_last;   // the K newest epochs up to the one just committed
  std::optional<std::int64_t> keep_every;  // epochs divisible by N, kept as snapshots

  bool keeps_everything() const { return !keep_last && !keep_every; }

  // The committed epochs to delete once `just_committed` is committed. Never `just_committed`
  // itself (the newest valid checkpoint), and never an epoch after it: those belong to an
  // earlier run that this one resumed before, and are replaced as this run commits them.
  // With only keep_every set, the newest checkpoint is kept besides the snapshots.
  std::vector<std::int64_t> epochs_to_delete(const std::vector<std::int64_t>& committed,
                                             std::int64_t just_committed) const;
};

// Throws UsageError unless K and N, when set, are at least 1.
EPOCHRUN_API void validate(const RetentionPolicy& policy);

}  // namespace epochrun
