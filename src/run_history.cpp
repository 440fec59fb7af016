#include "epochrun/run_history.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <fstream>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
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
  const auto file = directory / kRunHistoryFileName;
  const bool existed = std::filesystem::exists(file);
  FileDescriptor fd(
      ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    throw Error(errno_message("cannot open " + file.string()));
  }
  // One write of one whole line: O_APPEND puts it after every earlier record.
  const std::string line = json_text(record) + "\n";
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
      ::fsync(fd.get()) != 0) {
    const auto message = errno_message("cannot append to " + file.string());
    if (!existed) {
      std::error_code ignored;
      std::filesystem::remove(file, ignored);  // no empty history on a full disk
    }
    throw Error(message);
  }
  fd.close(file.string());
  if (!existed) {
    fsync_directory(directory);
  }
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
