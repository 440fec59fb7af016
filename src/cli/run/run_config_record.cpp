#include "run/run_config_record.hpp"

#include <boost/any.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace epochrun::cli {

namespace po = boost::program_options;

nlohmann::json config_to_json(const po::variables_map& values) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, entry] : values) {
    if (key == "help") {
      continue;
    }
    const auto& value = entry.value();
    if (const auto* text = boost::any_cast<std::string>(&value)) {
      json[key] = *text;
    } else if (const auto* signed_number = boost::any_cast<std::int64_t>(&value)) {
      json[key] = *signed_number;
    } else if (const auto* unsigned_number = boost::any_cast<std::uint64_t>(&value)) {
      json[key] = *unsigned_number;
    } else if (const auto* real = boost::any_cast<double>(&value)) {
      json[key] = *real;
    } else if (const auto* flag = boost::any_cast<bool>(&value)) {
      json[key] = *flag;
    } else if (const auto* texts = boost::any_cast<std::vector<std::string>>(&value)) {
      json[key] = *texts;
    }
  }
  return json;
}

}  // namespace epochrun::cli
