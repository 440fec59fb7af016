// The reference pipeline (caffe2 checkpoint_test): every node reads the values 0..9, three an
// epoch, into a total that starts at 100, and stops when its reader is exhausted. Totals after
// epochs 1..4: 103, 115, 136, 145.
//
// Its blobs are per-node (each node its own reader and total) and deliberately have no rule for
// a resume on another rank count (BlobUse::on_rank_change unset): such a resume is refused,
// naming them, which the rank-change tests check.
#pragma once

#include <cstdint>

#include "epochrun/job.hpp"

namespace epochrun::jobs {

struct SumPipelineOptions {
  std::int64_t num_items = 10;
  std::int64_t items_per_epoch = 3;
  std::int64_t initial_total = 100;
};

// Blob names, for tests and readers of the checkpoints.
inline constexpr const char* kSumValues = "values";
inline constexpr const char* kSumCursor = "cursor";
inline constexpr const char* kSumTotal = "total";
inline constexpr const char* kSumExhausted = "exhausted";

Job make_sum_pipeline(const SumPipelineOptions& options = {});

}  // namespace epochrun::jobs
