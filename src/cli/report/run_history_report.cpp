#include "report/run_history_report.hpp"

#include <string>

namespace epochrun::cli {
namespace {

// A field as text: null is "-", strings without quotes.
std::string text_of(const nlohmann::json& record, const char* key) {
  const auto found = record.find(key);
  if (found == record.end() || found->is_null()) {
    return "-";
  }
  return found->is_string() ? found->get<std::string>() : found->dump();
}

}  // namespace

void print_run_history(std::ostream& out, const nlohmann::json& history) {
  out << "run history: " << history.size() << " run(s)\n";
  for (const auto& record : history) {
    out << "  " << text_of(record, "started_at") << " .. " << text_of(record, "ended_at") << "  "
        << text_of(record, "host") << "  " << text_of(record, "ranks") << " ranks  slurm job "
        << text_of(record, "slurm_job_id") << " restart " << text_of(record, "restart_count")
        << "  resumed from " << text_of(record, "resumed_from") << "  "
        << text_of(record, "epochs_run") << " epoch(s)  last committed "
        << text_of(record, "last_committed_epoch") << "  exit " << text_of(record, "exit_code")
        << "  " << text_of(record, "stop_kind") << ": " << text_of(record, "stop_reason") << "\n";
  }
}

}  // namespace epochrun::cli
