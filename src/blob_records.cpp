#include "blob_records.hpp"

#include <nlohmann/json.hpp>

#include "json_text.hpp"

namespace epochrun {

std::string records_to_json(const std::vector<BlobRecord>& records,
                            const std::vector<BlobPlace>& places) {
  auto list = nlohmann::json::array();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    list.push_back({{"name", record.name},
                    {"dtype", dtype_name(record.dtype)},
                    {"shape", record.shape},
                    {"xxh64", record.xxh64},
                    {"offset", places.empty() ? 0 : places[i].offset},
                    {"packed", !places.empty() && places[i].packed}});
  }
  return json_text(list);
}

std::vector<BlobRecord> records_from_json(const std::string& text, std::vector<BlobPlace>* places) {
  std::vector<BlobRecord> records;
  for (const auto& entry : nlohmann::json::parse(text)) {
    records.push_back(BlobRecord{
        entry.at("name").get<std::string>(), parse_dtype(entry.at("dtype").get<std::string>()),
        entry.at("shape").get<Shape>(), entry.at("xxh64").get<std::uint64_t>()});
    if (places != nullptr) {
      places->push_back(
          BlobPlace{entry.at("offset").get<std::uint64_t>(), entry.at("packed").get<bool>()});
    }
  }
  return records;
}

}  // namespace epochrun
