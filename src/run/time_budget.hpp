// The end of this run's allocation (--time-budget, or SLURM's end time for the job), and
// whether the next epoch still fits before it. Internal to the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "slurm_environment.hpp"

namespace epochrun {

class TimeBudget {
 public:
  using Clock = std::chrono::steady_clock;

  TimeBudget() = default;  // no limit
  // `source` says where `end` came from, for the log ("--time-budget 600 s").
  TimeBudget(Clock::time_point end, std::string source, double margin_seconds);

  bool limited() const { return end_.has_value(); }
  const std::string& source() const { return source_; }
  double margin_seconds() const { return margin_; }
  double seconds_left(Clock::time_point now) const;

  void record_epoch(double seconds);
  void record_save(double seconds);

  // After an epoch, before its checkpoint: nullopt while that checkpoint, the next epoch and
  // its checkpoint (each as long as the longest of the recent ones) plus the margin still end
  // before the allocation does (or there is no limit); otherwise the stop reason.
  std::optional<std::string> exhausted(Clock::time_point now) const;

 private:
  static constexpr std::size_t kRecent = 5;  // durations the prediction looks at
  static double longest(const std::deque<double>& durations);

  std::optional<Clock::time_point> end_;
  std::string source_;
  double margin_ = 0;
  std::deque<double> epochs_;
  std::deque<double> saves_;
};

// SLURM's `squeue -o %e` end time ("2026-11-23T14:05:00", local time); nullopt for anything
// else ("N/A", "Unknown", "NONE": no end time).
std::optional<std::chrono::system_clock::time_point> parse_slurm_end_time(const std::string& text);

// Asks SLURM when job `job_id` ends: the answer as `squeue -h -j ID -o %e` prints it, or
// nullopt when it cannot be had (no squeue, a failure, no answer in time).
using SlurmEndTimeQuery = std::function<std::optional<std::string>(const std::string& job_id)>;

// The query squeue answers, bounded by a timeout.
std::optional<std::string> squeue_end_time(const std::string& job_id);

// Rank 0, once at start: the earlier of `budget_seconds` after `program_start`
// (--time-budget) and, under SLURM, the job's end time as `ask_end_time` answers it (a failure
// is a warning and no limit but the budget). `margin_seconds` unset: 60 s under SLURM, 0
// otherwise.
TimeBudget make_time_budget(TimeBudget::Clock::time_point program_start,
                            std::optional<double> budget_seconds,
                            std::optional<double> margin_seconds, const SlurmEnvironment& slurm,
                            const SlurmEndTimeQuery& ask_end_time = squeue_end_time);

}  // namespace epochrun
