#include "time_budget.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>

#include "subprocess.hpp"

namespace epochrun {
namespace {

constexpr double kDefaultSlurmMarginSeconds = 60;
constexpr std::chrono::milliseconds kSqueueTimeout{10'000};

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  const auto end = text.find_last_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

}  // namespace

TimeBudget::TimeBudget(Clock::time_point end, std::string source, double margin_seconds)
    : end_(end), source_(std::move(source)), margin_(margin_seconds) {}

double TimeBudget::seconds_left(Clock::time_point now) const {
  return end_ ? std::chrono::duration<double>(*end_ - now).count() : 0;
}

void TimeBudget::record_epoch(double seconds) {
  epochs_.push_back(seconds);
  if (epochs_.size() > kRecent) {
    epochs_.pop_front();
  }
}

void TimeBudget::record_save(double seconds) {
  saves_.push_back(seconds);
  if (saves_.size() > kRecent) {
    saves_.pop_front();
  }
}

double TimeBudget::longest(const std::deque<double>& durations) {
  return durations.empty() ? 0 : *std::max_element(durations.begin(), durations.end());
}

std::optional<std::string> TimeBudget::exhausted(Clock::time_point now) const {
  if (!end_) {
    return std::nullopt;
  }
  const double save = longest(saves_);
  const double needed = save + longest(epochs_) + save + margin_;
  const double left = seconds_left(now);
  if (needed <= left) {
    return std::nullopt;
  }
  return fmt::format(
      "time limit: {:.1f} s left ({}), but this checkpoint, the next epoch and its checkpoint "
      "need about {:.1f} s with the {:.0f} s margin (--time-margin)",
      std::max(left, 0.0), source_, needed, margin_);
}

std::optional<std::chrono::system_clock::time_point> parse_slurm_end_time(const std::string& text) {
  std::tm fields{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &fields);
  if (end == nullptr || *end != '\0') {
    return std::nullopt;
  }
  fields.tm_isdst = -1;  // squeue prints local time
  const std::time_t seconds = std::mktime(&fields);
  if (seconds == -1) {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(seconds);
}

std::optional<std::string> squeue_end_time(const std::string& job_id) {
  return command_output({"squeue", "-h", "-j", job_id, "-o", "%e"}, kSqueueTimeout);
}

TimeBudget make_time_budget(TimeBudget::Clock::time_point program_start,
                            std::optional<double> budget_seconds,
                            std::optional<double> margin_seconds, const SlurmEnvironment& slurm,
                            const SlurmEndTimeQuery& ask_end_time) {
  const double margin = margin_seconds.value_or(slurm.job_id ? kDefaultSlurmMarginSeconds : 0.0);
  std::optional<TimeBudget::Clock::time_point> end;
  std::string source;
  if (budget_seconds) {
    end = program_start + std::chrono::duration_cast<TimeBudget::Clock::duration>(
                              std::chrono::duration<double>(*budget_seconds));
    source = fmt::format("--time-budget {} s", *budget_seconds);
  }
  if (slurm.job_id) {
    const auto output = ask_end_time(*slurm.job_id);
    const auto text = output ? trimmed(*output) : "";
    if (const auto slurm_end = parse_slurm_end_time(text)) {
      const auto steady_end =
          TimeBudget::Clock::now() + std::chrono::duration_cast<TimeBudget::Clock::duration>(
                                         *slurm_end - std::chrono::system_clock::now());
      if (!end || steady_end < *end) {
        end = steady_end;
        source = "SLURM job " + *slurm.job_id + " ends at " + text;
      }
    } else if (!output) {
      spdlog::warn(
          "cannot ask SLURM for the end time of job {} (squeue failed or took over {} s): "
          "no time limit but --time-budget",
          *slurm.job_id, kSqueueTimeout.count() / 1000);
    }
  }
  if (!end) {
    return TimeBudget();
  }
  return TimeBudget(*end, source, margin);
}

}  // namespace epochrun
