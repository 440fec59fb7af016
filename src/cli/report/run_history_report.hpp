// `epochrun inspect`'s account of a checkpoint directory's run history (runs.jsonl).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

namespace epochrun::cli {

// One line per run, oldest first: when, where, how it started and why it stopped.
void print_run_history(std::ostream& out, const nlohmann::json& history);

}  // namespace epochrun::cli
