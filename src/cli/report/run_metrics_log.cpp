#include "report/run_metrics_log.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "epochrun/errors.hpp"
#include "regular_file.hpp"

namespace epochrun::cli {
namespace {

// An epoch's line holds every rank's figures, a few hundred bytes a rank: a log larger than this
// (thousands of epochs of a thousand ranks) is damaged, and is judged so without being read (one
// that reads as terabytes would exhaust memory first).
constexpr std::uint64_t kMaxMetricsBytes = std::uint64_t{4} << 30;

template <typename T>
std::optional<T> field(const nlohmann::json& object, const char* key) {
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number()) {
    return std::nullopt;
  }
  return found->get<T>();
}

std::vector<RankFigures> ranks_of(const nlohmann::json& line) {
  std::vector<RankFigures> ranks;
  const auto found = line.find("ranks");
  if (found == line.end() || !found->is_array()) {
    return ranks;
  }
  for (const auto& figures : *found) {
    if (!figures.is_object()) {
      continue;
    }
    RankFigures rank;
    rank.rank = field<int>(figures, "rank").value_or(static_cast<int>(ranks.size()));
    rank.epoch_seconds = field<double>(figures, "epoch_seconds");
    rank.blocked_seconds = field<double>(figures, "blocked_seconds");
    rank.save_seconds = field<double>(figures, "save_seconds");
    rank.save_bytes = field<std::uint64_t>(figures, "save_bytes");
    rank.load_seconds = field<double>(figures, "load_seconds");
    rank.load_bytes = field<std::uint64_t>(figures, "load_bytes");
    rank.peak_rss_bytes = field<std::uint64_t>(figures, "peak_rss_bytes");
    ranks.push_back(rank);
  }
  std::sort(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  return ranks;
}

std::optional<bool> committed_of(const nlohmann::json& line) {
  const auto found = line.find("committed");
  return found != line.end() && found->is_boolean() ? std::optional(found->get<bool>())
                                                    : std::nullopt;
}

// An asynchronous save's completion: its figures join those of its epoch.
void apply_save(LoggedEpoch& epoch, const nlohmann::json& line) {
  for (const auto& figures : ranks_of(line)) {
    auto at = std::find_if(epoch.ranks.begin(), epoch.ranks.end(),
                           [&](const RankFigures& r) { return r.rank == figures.rank; });
    if (at == epoch.ranks.end()) {
      epoch.ranks.push_back(figures);
      continue;
    }
    at->save_seconds = figures.save_seconds ? figures.save_seconds : at->save_seconds;
    at->save_bytes = figures.save_bytes ? figures.save_bytes : at->save_bytes;
  }
  if (auto committed = committed_of(line)) {
    epoch.committed = committed;
  }
}

// Adds one parsed line to the log; false when it is not a metrics record.
bool add_line(MetricsLog& log, const nlohmann::json& line) {
  if (!line.is_object() || !line.contains("event") || !line["event"].is_string() ||
      !field<std::int64_t>(line, "epoch")) {
    return false;
  }
  const auto started = line.value("run_started", std::string());
  if (log.runs.empty() || log.runs.back().started != started) {
    log.runs.push_back({started, std::nullopt, {}});
  }
  auto& run = log.runs.back();
  const auto event = line["event"].get<std::string>();
  LoggedEpoch metrics{*field<std::int64_t>(line, "epoch"), ranks_of(line), committed_of(line)};
  if (event == "epoch") {
    run.epochs.push_back(std::move(metrics));
  } else if (event == "load") {
    run.load = std::move(metrics);
  } else if (event == "save") {
    auto at = std::find_if(run.epochs.rbegin(), run.epochs.rend(),
                           [&](const LoggedEpoch& e) { return e.epoch == metrics.epoch; });
    if (at == run.epochs.rend()) {
      run.epochs.push_back(std::move(metrics));
    } else {
      apply_save(*at, line);
    }
  }  // other events: a later version's, ignored
  return true;
}

}  // namespace

int LoggedRun::num_ranks() const {
  std::size_t ranks = load ? load->ranks.size() : 0;
  for (const auto& epoch : epochs) {
    ranks = std::max(ranks, epoch.ranks.size());
  }
  return static_cast<int>(ranks);
}

MetricsLog read_metrics_log(const std::filesystem::path& file) {
  // Opened as a checkpoint file is: a FIFO under the name is refused, never waited on.
  std::string text;
  try {
    text = read_regular_file(file, kMaxMetricsBytes);
  } catch (const FileTooLarge& error) {
    throw UsageError(error.what());
  } catch (const CheckpointNotFound&) {
    throw UsageError("cannot read " + file.string() +
                     ": no such file (runs write it into their checkpoint directory)");
  } catch (const CorruptCheckpoint&) {
    throw UsageError("cannot read " + file.string() +
                     ": not a regular file (a FIFO, a directory or a symlink)");
  } catch (const std::exception& error) {
    throw UsageError("cannot read " + file.string() + ": " + error.what());
  }
  MetricsLog log;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    const bool last = end == std::string::npos || end + 1 >= text.size();
    const bool complete = end != std::string::npos;
    end = complete ? end : text.size();
    const auto line =
        nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                              text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    const bool empty = end == start;
    if (!empty && !add_line(log, line) && !(last && (!complete || line.is_discarded()))) {
      ++log.damaged_lines;
    }
    start = end + 1;
  }
  return log;
}

}  // namespace epochrun::cli
