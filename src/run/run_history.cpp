#include "run_history_file.hpp"

#include <spdlog/spdlog.h>

#include <ctime>
#include <sstream>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/run_summary.hpp"
#include "host_name.hpp"
#include "json_text.hpp"
#include "regular_file.hpp"
#include "run_history_json.hpp"

namespace epochrun {
namespace {

// A run's record is a kilobyte or two: a run history larger than this (over 100,000 runs) is
// damaged, and is judged so without being read (one that reads as terabytes would exhaust
// memory first).
constexpr std::uint64_t kMaxRunHistoryBytes = std::uint64_t{256} << 20;

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

template <typename T>
void read_field(const nlohmann::json& json, const char* key, T& field) {
  if (json.contains(key)) {
    json.at(key).get_to(field);
  }
}

template <typename T>
void read_field(const nlohmann::json& json, const char* key, std::optional<T>& field) {
  if (json.contains(key) && !json.at(key).is_null()) {
    field = json.at(key).get<T>();
  }
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

RunRecord run_record(const RunSummary& summary, std::chrono::system_clock::time_point started,
                     std::chrono::system_clock::time_point ended) {
  return {.started_at = utc_timestamp(started),
          .ended_at = utc_timestamp(ended),
          .host = host_name(),
          .ranks = summary.num_ranks,
          .slurm_job_id = summary.slurm_job_id,
          .restart_count = summary.restart_count,
          .resumed_from = summary.resumed_from,
          .resumed_from_ranks = summary.resumed_from_ranks,
          .resumed_from_level = summary.resumed_from_level,
          .resume_note = summary.resume_note,
          .resumed_parts = summary.resumed_parts,
          .stop_kind = stop_kind_name(summary.stop_kind),
          .stop_reason = summary.stop_reason,
          .epochs_run = summary.epochs_run,
          .last_committed_epoch = summary.last_committed_epoch,
          .exit_code = summary.exit_code};
}

void to_json(nlohmann::json& json, const RunRecord& record) {
  json = {{"started_at", record.started_at},
          {"ended_at", record.ended_at},
          {"host", record.host},
          {"ranks", record.ranks},
          {"slurm_job_id", optional_json(record.slurm_job_id)},
          {"restart_count", record.restart_count},
          {"resumed_from", optional_json(record.resumed_from)},
          {"resumed_from_ranks", optional_json(record.resumed_from_ranks)},
          {"resumed_from_level", optional_json(record.resumed_from_level)},
          {"resume_note", optional_json(record.resume_note)},
          {"resumed_parts", optional_json(record.resumed_parts)},
          {"stop_kind", record.stop_kind},
          {"stop_reason", record.stop_reason},
          {"epochs_run", record.epochs_run},
          {"last_committed_epoch", optional_json(record.last_committed_epoch)},
          {"exit_code", record.exit_code}};
}

void from_json(const nlohmann::json& json, RunRecord& record) {
  read_field(json, "started_at", record.started_at);
  read_field(json, "ended_at", record.ended_at);
  read_field(json, "host", record.host);
  read_field(json, "ranks", record.ranks);
  read_field(json, "slurm_job_id", record.slurm_job_id);
  read_field(json, "restart_count", record.restart_count);
  read_field(json, "resumed_from", record.resumed_from);
  read_field(json, "resumed_from_ranks", record.resumed_from_ranks);
  read_field(json, "resumed_from_level", record.resumed_from_level);
  read_field(json, "resume_note", record.resume_note);
  read_field(json, "resumed_parts", record.resumed_parts);
  read_field(json, "stop_kind", record.stop_kind);
  read_field(json, "stop_reason", record.stop_reason);
  read_field(json, "epochs_run", record.epochs_run);
  read_field(json, "last_committed_epoch", record.last_committed_epoch);
  read_field(json, "exit_code", record.exit_code);
}

void append_run_record(const std::filesystem::path& directory, const RunRecord& record) {
  append_line(directory / kRunHistoryFileName, json_text(nlohmann::json(record)) + "\n", true);
}

std::vector<RunRecord> read_run_history(const std::filesystem::path& directory) {
  std::string text;
  try {
    text = read_regular_file(directory / kRunHistoryFileName, kMaxRunHistoryBytes);
  } catch (const CheckpointNotFound&) {
    return {};  // no run recorded yet
  } catch (const std::exception& error) {
    // A FIFO or a directory under its name is never read (a FIFO's read waits for a writer
    // forever); appending to it fails too, with its own warning.
    spdlog::warn("run history not read: {}", error.what());
    return {};
  }
  std::vector<RunRecord> records;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto json = nlohmann::json::parse(line, nullptr, false);
    if (!json.is_object()) {
      continue;
    }
    try {
      records.push_back(json.get<RunRecord>());
    } catch (const nlohmann::json::exception&) {
      // a hand-edited field of the wrong type: skipped like a line that does not parse
    }
  }
  return records;
}

}  // namespace epochrun
