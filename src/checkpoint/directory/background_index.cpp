#include "background_index.hpp"

#include "durable_file.hpp"

namespace epochrun {

BackgroundIndex::BackgroundIndex(const CheckpointIndex& index)
    : rewrite_("index " + index.file().string(), [this, &index] {
        index.text_into(text_);
        write_file_atomically(index.file(), text_);
      }) {}

}  // namespace epochrun
