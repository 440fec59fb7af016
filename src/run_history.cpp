#include "epochrun/run_history.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "json_text.hpp"

namespace epochrun {
namespace {

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

}  // namespace

std::string utc_timestamp(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm fields{};
  gmtime_r(&seconds, &fields);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &fields);
  return text;
}

nlohmann::json run_record(const RunSummary& summary, std::chrono::system_clock::time_point started,
                          std::chrono::system_clock::time_point ended) {
  auto optional_json = [](const auto& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  return {{"started_at", utc_timestamp(started)},
          {"ended_at", utc_timestamp(ended)},
          {"host", host_name()},
          {"ranks", summary.num_ranks},
          {"slurm_job_id", optional_json(summary.slurm_job_id)},
          {"restart_count", summary.restart_count},
          {"resumed_from", optional_json(summary.resumed_from)},
          {"stop_kind", stop_kind_name(summary.stop_kind)},
          {"stop_reason", summary.stop_reason},
          {"epochs_run", summary.epochs_run},
          {"last_committed_epoch", optional_json(summary.last_committed_epoch)},
          {"exit_code", summary.exit_code}};
}

void append_run_record(const std::filesystem::path& directory, const nlohmann::json& record) {
  append_line(directory / kRunHistoryFileName, json_text(record) + "\n", true);
}

nlohmann::json read_run_history(const std::filesystem::path& directory) {
  auto records = nlohmann::json::array();
  std::ifstream in(directory / kRunHistoryFileName);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_object()) {
      records.push_back(std::move(record));
    }
  }
  return records;
}

}  // namespace epochrun
