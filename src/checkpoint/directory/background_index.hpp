// Rank 0 writes index.json on a thread of its own, paced (BackgroundRewrite): the catalogue is
// not the commit point, and its durable write costs a commit more than the checkpoint's own.
#pragma once

#include <string>

#include "background_rewrite.hpp"
#include "checkpoint_index.hpp"

namespace epochrun {

class BackgroundIndex {
 public:
  // Writes `index`'s text to index->file() when told; `index` must outlive this.
  explicit BackgroundIndex(const CheckpointIndex& index);

  // The index changed: its text is written soon. A failure to write it is a warning in the log.
  void changed() { rewrite_.changed(); }
  // Returns once the index's text of this moment is written (or failed).
  void flush() { rewrite_.flush(); }

 private:
  std::string text_;           // the writer thread's, the last text it wrote (its memory reused)
  BackgroundRewrite rewrite_;  // last: its thread uses text_
};

}  // namespace epochrun
