// RunRecord <-> JSON, for nlohmann::json's conversions (`nlohmann::json(record)`,
// `json.get<RunRecord>()`). Internal to the library and the program.
#pragma once

#include <nlohmann/json.hpp>

#include "epochrun/run_history.hpp"

namespace epochrun {

void to_json(nlohmann::json& json, const RunRecord& record);
// Missing fields keep their defaults; a field of the wrong type throws nlohmann::json's error.
void from_json(const nlohmann::json& json, RunRecord& record);

}  // namespace epochrun
