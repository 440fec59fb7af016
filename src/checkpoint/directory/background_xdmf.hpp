// `epochrun run --xdmf FILE`: rank 0 keeps an XDMF file describing every committed epoch's
// global arrays (format/xdmf_collection.hpp) up to date, rewriting it after each commit and
// deletion on a thread of its own (BackgroundRewrite), off the job's path. Each epoch's arrays
// are read once from its file's layout record (an epoch from before this run included; no HDF5
// call, which this thread may not make) and kept; a file without a record is left out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>

#include "background_rewrite.hpp"
#include "checkpoint_index.hpp"
#include "xdmf_collection.hpp"

namespace epochrun {

class BackgroundXdmf {
 public:
  // Describes the epochs of `index`, which must outlive this, in `file`.
  BackgroundXdmf(const CheckpointIndex& index, std::filesystem::path file);

  void changed() { rewrite_.changed(); }
  void flush() { rewrite_.flush(); }

 private:
  void rewrite();

  const CheckpointIndex& index_;
  std::filesystem::path file_;
  std::map<std::int64_t, XdmfEpoch> epochs_;  // the writer thread's, by epoch
  BackgroundRewrite rewrite_;                 // last: its thread uses the members above
};

}  // namespace epochrun
