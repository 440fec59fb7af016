// JSON to text for everything epochrun writes (summary, index, config record, inspect output).
// Paths and messages on Linux are bytes, not necessarily UTF-8; nlohmann::json's dump throws
// on invalid UTF-8, which would fail a run at its very end. Invalid bytes become U+FFFD here.
// Internal to the library and the program.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace epochrun {

inline std::string json_text(const nlohmann::json& json, int indent = -1) {
  return json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace epochrun
