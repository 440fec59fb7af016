#include "run_metrics.hpp"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint_saver.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "json_text.hpp"
#include "regular_file.hpp"
#include "run_history_file.hpp"

namespace epochrun {

// What each rank sends rank 0: NaN for an absent figure.
struct RunMetrics::Figures {
  static constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  double epoch_seconds = kAbsent;
  double blocked_seconds = kAbsent;
  double save_seconds = kAbsent;
  double save_bytes = kAbsent;
  double load_seconds = kAbsent;
  double load_bytes = kAbsent;
  double peak_rss_bytes = kAbsent;
  double redundancy_seconds = kAbsent;
  // A save's phases (kAbsent when there is no save in the line) and page faults.
  std::array<double, kSavePhaseNames.size()> save_phases = absent_phases();
  double save_minor_faults = kAbsent;
  double save_major_faults = kAbsent;

  static std::array<double, kSavePhaseNames.size()> absent_phases() {
    std::array<double, kSavePhaseNames.size()> phases;
    phases.fill(kAbsent);
    return phases;
  }
  void set_phases(const SavePhases& phases) {
    save_phases = phases.seconds;
    save_minor_faults = double(phases.faults.minor);
    save_major_faults = double(phases.faults.major);
  }
};

namespace {

// ISO 8601 in UTC with milliseconds: it tells the runs in one file apart, and a requeued run
// can start within the second its predecessor started.
std::string run_timestamp(std::chrono::system_clock::time_point time) {
  const auto since_epoch = time.time_since_epoch();
  const auto milliseconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
  auto text = utc_timestamp(time);  // "...T12:34:56Z"
  char fraction[8];
  std::snprintf(fraction, sizeof fraction, ".%03lldZ", static_cast<long long>(milliseconds));
  text.pop_back();
  return text + fraction;
}

double peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

void put(nlohmann::json& object, const char* key, double value, bool integral = false) {
  if (!std::isnan(value)) {
    object[key] = integral ? nlohmann::json(std::uint64_t(value)) : nlohmann::json(value);
  }
}

}  // namespace

const char* save_level_name(const SaveOutcome& save) {
  return save.node_local ? "node-local" : "flushed";
}

RunMetrics::RunMetrics(const Communicator& comm, std::filesystem::path checkpoint_dir,
                       std::chrono::system_clock::time_point run_started)
    : comm_(comm),
      file_(checkpoint_dir.empty() ? std::filesystem::path() : checkpoint_dir / kMetricsFileName),
      run_started_(run_timestamp(run_started)) {
  if (!comm_.is_root() || file_.empty()) {
    return;
  }
  // A run killed inside an append leaves a torn last line: end it, so that this run's first
  // line is not glued to it (readers skip the torn one). Opened as a checkpoint file is: a FIFO
  // under the name is never read (its read would wait for a writer forever).
  try {
    const auto fd = open_regular_file_for_reading(file_);
    const auto size = file_size(fd.get());
    if (size > 0) {
      std::array<std::byte, 1> last{};
      read_at(fd.get(), size - 1, last, file_.string());
      if (last[0] != std::byte{'\n'}) {
        append_line(file_, "\n", false);
      }
    }
  } catch (const CheckpointNotFound&) {
    // the first run to record metrics here
  } catch (const std::exception& error) {
    not_recorded(error);
  }
}

void RunMetrics::epoch(std::int64_t epoch, const EpochFigures& figures) const {
  Figures mine;
  mine.epoch_seconds = figures.epoch_seconds;
  mine.blocked_seconds = figures.blocked_seconds.value_or(Figures::kAbsent);
  mine.save_seconds = figures.save_seconds.value_or(Figures::kAbsent);
  mine.save_bytes = figures.save_bytes ? double(*figures.save_bytes) : Figures::kAbsent;
  if (figures.save_phases) {
    mine.set_phases(*figures.save_phases);
  }
  mine.peak_rss_bytes = peak_rss_bytes();
  append("epoch", epoch, mine, std::nullopt, figures.array_paths, figures.save_level);
}

void RunMetrics::load(std::int64_t epoch, double seconds, std::uint64_t bytes) const {
  Figures mine;
  mine.load_seconds = seconds;
  mine.load_bytes = double(bytes);
  mine.peak_rss_bytes = peak_rss_bytes();
  append("load", epoch, mine, std::nullopt);
}

void RunMetrics::save(const SaveOutcome& save) const {
  Figures mine;
  mine.blocked_seconds = save.blocked_seconds;
  mine.save_seconds = save.seconds;
  mine.save_bytes = double(save.bytes);
  mine.set_phases(save.phases);
  mine.peak_rss_bytes = peak_rss_bytes();
  append("save", save.epoch, mine, save.committed, save.array_paths, save_level_name(save));
}

void RunMetrics::redundancy(std::int64_t epoch, double seconds) const {
  Figures mine;
  mine.redundancy_seconds = seconds;
  mine.peak_rss_bytes = peak_rss_bytes();
  append("redundancy", epoch, mine, std::nullopt, {}, "node-local");
}

void RunMetrics::append(const std::string& event, std::int64_t epoch, const Figures& mine,
                        const std::optional<bool>& committed,
                        const std::vector<std::pair<std::string, ArrayPath>>& array_paths,
                        const std::string& level) const {
  if (file_.empty()) {
    return;
  }
  const auto gathered = comm_.gather(std::as_bytes(std::span(&mine, 1)));
  if (!comm_.is_root()) {
    return;
  }
  auto ranks = nlohmann::json::array();
  for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
    Figures figures;
    std::memcpy(&figures, gathered[rank].data(), sizeof figures);
    nlohmann::json entry = {{"rank", rank}};
    put(entry, "epoch_seconds", figures.epoch_seconds);
    put(entry, "blocked_seconds", figures.blocked_seconds);
    put(entry, "save_seconds", figures.save_seconds);
    put(entry, "save_bytes", figures.save_bytes, true);
    put(entry, "load_seconds", figures.load_seconds);
    put(entry, "load_bytes", figures.load_bytes, true);
    put(entry, "peak_rss_bytes", figures.peak_rss_bytes, true);
    put(entry, "redundancy_seconds", figures.redundancy_seconds);
    if (!std::isnan(figures.save_phases[0])) {
      nlohmann::json phases = nlohmann::json::object();
      for (std::size_t i = 0; i < kSavePhaseNames.size(); ++i) {
        phases[kSavePhaseNames[i]] = figures.save_phases[i];
      }
      entry["save_phases"] = std::move(phases);
      put(entry, "save_minor_faults", figures.save_minor_faults, true);
      put(entry, "save_major_faults", figures.save_major_faults, true);
    }
    ranks.push_back(std::move(entry));
  }
  nlohmann::json line = {{"run_started", run_started_}, {"event", event}, {"epoch", epoch}};
  if (committed) {
    line["committed"] = *committed;
  }
  if (!level.empty()) {
    line["level"] = level;
  }
  if (!array_paths.empty()) {
    nlohmann::json paths = nlohmann::json::object();
    for (const auto& [name, path] : array_paths) {
      paths[name] = array_path_name(path);
    }
    line["array_io"] = std::move(paths);
  }
  line["ranks"] = std::move(ranks);
  try {
    // Never fsynced: figures are not state and a reader skips a torn line (on ext4, the next
    // commit's journal flush may carry the line to the disk anyway). An fsync here stalled the job
    // up to 34 ms per epoch, waiting for the file system to free a retired checkpoint. The
    // directory is the saves' to create: without it there is nothing to measure against.
    append_line(file_, json_text(line) + "\n", false);
  } catch (const std::exception& error) {
    not_recorded(error);
  }
}

void RunMetrics::not_recorded(const std::exception& error) const {
  if (!warned_) {
    spdlog::warn("metrics not recorded (further failures are not logged): {}", error.what());
    warned_ = true;
  }
}

}  // namespace epochrun
