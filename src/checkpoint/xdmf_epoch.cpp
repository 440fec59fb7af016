#include "xdmf_epoch.hpp"

#include "epochrun/checkpoint_file.hpp"

namespace epochrun {

XdmfEpoch xdmf_epoch(const std::filesystem::path& checkpoint,
                     const std::filesystem::path& xdmf_file) {
  const CheckpointReader reader(checkpoint);
  // Relative to the XDMF file's directory, as its readers resolve a path, so that the two can
  // be moved together; absolute when there is no relative way (another file system root).
  const auto base = std::filesystem::absolute(xdmf_file).parent_path();
  auto file = std::filesystem::absolute(checkpoint).lexically_proximate(base);
  return XdmfEpoch{reader.header().epoch, file.string(), reader.header().arrays};
}

}  // namespace epochrun
