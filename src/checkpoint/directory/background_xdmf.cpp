#include "background_xdmf.hpp"

#include <spdlog/spdlog.h>

#include "durable_file.hpp"
#include "xdmf_epoch.hpp"

namespace epochrun {

BackgroundXdmf::BackgroundXdmf(const CheckpointIndex& index, std::filesystem::path file)
    : index_(index),
      file_(std::move(file)),
      rewrite_("XDMF file " + file_.string(), [this] { rewrite(); }) {}

void BackgroundXdmf::rewrite() {
  std::map<std::int64_t, XdmfEpoch> current;
  for (auto epoch : index_.epochs()) {
    auto known = epochs_.find(epoch);
    if (known != epochs_.end()) {
      current.insert(epochs_.extract(known));
      continue;
    }
    try {
      if (auto entry = xdmf_epoch_without_hdf5(index_.directory().file_for(epoch), file_)) {
        current.emplace(epoch, std::move(*entry));
      } else {
        spdlog::debug(
            "XDMF file {} leaves out epoch {}: its file has no layout record "
            "(`epochrun inspect --xdmf` describes it)",
            file_.string(), epoch);
      }
    } catch (const std::exception& error) {
      // Retention may have taken it meanwhile; a damaged one has no arrays to show.
      spdlog::debug("XDMF file {} leaves out epoch {}: {}", file_.string(), epoch, error.what());
    }
  }
  epochs_ = std::move(current);
  std::vector<XdmfEpoch> described;
  described.reserve(epochs_.size());
  for (const auto& [epoch, entry] : epochs_) {
    described.push_back(entry);
  }
  write_file_atomically(file_, xdmf_text(described));
}

}  // namespace epochrun
