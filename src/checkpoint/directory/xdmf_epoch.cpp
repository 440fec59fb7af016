#include "xdmf_epoch.hpp"

#include "checkpoint_layout_v3.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

// Relative to the XDMF file's directory, as its readers resolve a path, so that the two can be
// moved together; absolute when there is no relative way (another file system root).
std::string as_named_from(const std::filesystem::path& checkpoint,
                          const std::filesystem::path& xdmf_file) {
  const auto base = std::filesystem::absolute(xdmf_file).parent_path();
  return std::filesystem::absolute(checkpoint).lexically_proximate(base).string();
}

}  // namespace

XdmfEpoch xdmf_epoch(const std::filesystem::path& checkpoint,
                     const std::filesystem::path& xdmf_file) {
  const CheckpointReader reader(checkpoint);
  return XdmfEpoch{reader.header().epoch, as_named_from(checkpoint, xdmf_file),
                   reader.header().arrays};
}

std::optional<XdmfEpoch> xdmf_epoch_without_hdf5(const std::filesystem::path& checkpoint,
                                                 const std::filesystem::path& xdmf_file) {
  const auto fd = open_regular_file_for_reading(checkpoint);
  const auto integrity = read_integrity_header(fd.get(), checkpoint.string());
  if (integrity.layout_record.empty()) {
    return std::nullopt;
  }
  const auto stored = read_checkpoint_layout_from_record(fd.get(), integrity);
  XdmfEpoch epoch{stored.description.epoch, as_named_from(checkpoint, xdmf_file), {}};
  for (const auto& blob : stored.description.blobs) {
    if (blob.kind == StorageKind::kGlobalArray) {
      epoch.arrays.push_back(
          GlobalArrayRecord{blob.name, blob.dtype, blob.shape, blob.writer_blocks, {}});
    }
  }
  return epoch;
}

}  // namespace epochrun
