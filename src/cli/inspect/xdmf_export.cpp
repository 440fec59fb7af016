#include "inspect/xdmf_export.hpp"

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "xdmf_epoch.hpp"

namespace epochrun::cli {

nlohmann::json export_xdmf(const InspectSource& source, const std::filesystem::path& file) {
  std::vector<XdmfEpoch> epochs;
  auto described = nlohmann::json::array();
  auto skipped = nlohmann::json::array();
  std::size_t arrays = 0;
  for (const auto& choice : source.all()) {
    try {
      auto epoch = xdmf_epoch(choice.file, file);
      if (choice.epoch && epoch.epoch != *choice.epoch) {
        throw CorruptCheckpoint("checkpoint " + choice.file.string() + " records epoch " +
                                std::to_string(epoch.epoch));
      }
      arrays += epoch.arrays.size();
      described.push_back(epoch.epoch);
      epochs.push_back(std::move(epoch));
    } catch (const CheckpointNotFound&) {
      // deleted since it was listed (retention of a running job): not damage
    } catch (const CheckpointError& error) {
      skipped.push_back({{"epoch", choice.epoch ? nlohmann::json(*choice.epoch) : nullptr},
                         {"error", error.what()}});
    }
  }
  write_file_atomically(file, xdmf_text(epochs));
  return {{"xdmf", file.string()}, {"epochs", described}, {"arrays", arrays}, {"skipped", skipped}};
}

}  // namespace epochrun::cli
