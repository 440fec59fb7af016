#include "time_budget.hpp"

#include <gtest/gtest.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace epochrun {
namespace {

using std::chrono::seconds;

TEST(TimeBudget, StopsWhenThisSaveTheNextEpochAndItsSaveWouldNotFit) {
  const auto now = TimeBudget::Clock::now();
  TimeBudget budget(now + seconds(100), "--time-budget 100 s", 10);
  budget.record_save(5);
  budget.record_epoch(20);
  EXPECT_FALSE(budget.exhausted(now).has_value());  // 5 + 20 + 5 + 10 = 40 of 100
  budget.record_epoch(70);
  EXPECT_FALSE(budget.exhausted(now).has_value());  // 5 + 70 + 5 + 10 = 90
  budget.record_save(15);
  const auto reason = budget.exhausted(now);  // 15 + 70 + 15 + 10 = 110
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(reason->rfind("time limit: 100.0 s left (--time-budget 100 s)", 0), 0u) << *reason;
  EXPECT_NE(reason->find("need about 110.0 s with the 10 s margin"), std::string::npos) << *reason;
  // Only the recent durations count: five short epochs and saves later, it fits again.
  for (int i = 0; i < 5; ++i) {
    budget.record_epoch(1);
    budget.record_save(1);
  }
  EXPECT_FALSE(budget.exhausted(now).has_value());
  EXPECT_TRUE(budget.exhausted(now + seconds(95)).has_value());
}

TEST(TimeBudget, WithoutALimitNothingIsExhausted) {
  TimeBudget budget;
  budget.record_epoch(1e9);
  EXPECT_FALSE(budget.limited());
  EXPECT_FALSE(budget.exhausted(TimeBudget::Clock::now()).has_value());
}

TEST(TimeBudget, SlurmEndTimes) {
  const auto end = parse_slurm_end_time("2026-11-23T14:05:00");
  ASSERT_TRUE(end.has_value());
  const std::time_t seconds_since_epoch = std::chrono::system_clock::to_time_t(*end);
  std::tm local{};
  localtime_r(&seconds_since_epoch, &local);
  EXPECT_EQ(local.tm_hour, 14);
  EXPECT_EQ(local.tm_min, 5);
  for (const char* none : {"N/A", "Unknown", "NONE", "", "2026-11-23T14:05:00x", "14:05"}) {
    EXPECT_FALSE(parse_slurm_end_time(none).has_value()) << none;
  }
}

// The end time as squeue prints it: local time, whole seconds.
std::string slurm_time_in(std::chrono::seconds from_now) {
  const std::time_t when =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + from_now);
  std::tm local{};
  localtime_r(&when, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local);
  return text;
}

// A SLURM job-end query that answers `answer` and records which jobs it was asked about.
struct Answering {
  explicit Answering(std::optional<std::string> reply = std::nullopt) : answer(std::move(reply)) {}
  std::optional<std::string> answer;
  std::vector<std::string> asked;
  SlurmEndTimeQuery query() {
    return [this](const std::string& job_id) {
      asked.push_back(job_id);
      return answer;
    };
  }
};

SlurmEnvironment slurm_job(const std::string& id) {
  SlurmEnvironment slurm;
  slurm.job_id = id;
  return slurm;
}

TEST(TimeBudget, TheBudgetCountsFromTheProgramStartAndSlurmDefaultsTheMargin) {
  const auto start = TimeBudget::Clock::now() - seconds(30);
  Answering never;
  const auto budget =
      make_time_budget(start, 40.0, std::nullopt, SlurmEnvironment{}, never.query());
  ASSERT_TRUE(budget.limited());
  EXPECT_LE(budget.seconds_left(TimeBudget::Clock::now()), 10.0);
  EXPECT_EQ(budget.margin_seconds(), 0.0);
  EXPECT_FALSE(
      make_time_budget(start, std::nullopt, 5.0, SlurmEnvironment{}, never.query()).limited());
  EXPECT_TRUE(never.asked.empty());  // outside SLURM there is no one to ask
  // Under SLURM, when the end time cannot be had (squeue missing, failing or too slow): a
  // warning, and --time-budget alone counts, with the SLURM default margin.
  Answering failing;
  const auto under_slurm =
      make_time_budget(start, 40.0, std::nullopt, slurm_job("999999"), failing.query());
  EXPECT_EQ(under_slurm.source(), "--time-budget 40 s");
  EXPECT_EQ(under_slurm.margin_seconds(), 60.0);
  EXPECT_EQ(failing.asked, std::vector<std::string>{"999999"});
}

TEST(TimeBudget, TheSlurmEndTimeCountsWhenItComesFirst) {
  const auto start = TimeBudget::Clock::now();
  const auto end_text = slurm_time_in(seconds(120));
  Answering slurm{end_text + "\n"};
  const auto budget = make_time_budget(start, 3600.0, 5.0, slurm_job("42"), slurm.query());
  ASSERT_TRUE(budget.limited());
  EXPECT_EQ(budget.source(), "SLURM job 42 ends at " + end_text);  // the answer trimmed
  EXPECT_EQ(slurm.asked, std::vector<std::string>{"42"});
  // Whole seconds: up to one second earlier than asked.
  const double left = budget.seconds_left(TimeBudget::Clock::now());
  EXPECT_GT(left, 110.0);
  EXPECT_LE(left, 120.5);
  EXPECT_EQ(budget.margin_seconds(), 5.0);
  // SLURM alone limits a run without --time-budget.
  EXPECT_TRUE(make_time_budget(start, std::nullopt, std::nullopt, slurm_job("42"), slurm.query())
                  .limited());
}

TEST(TimeBudget, TheBudgetCountsWhenItComesBeforeTheSlurmEndTime) {
  const auto start = TimeBudget::Clock::now();
  Answering slurm{slurm_time_in(seconds(3600))};
  const auto budget = make_time_budget(start, 40.0, std::nullopt, slurm_job("42"), slurm.query());
  EXPECT_EQ(budget.source(), "--time-budget 40 s");
  EXPECT_LE(budget.seconds_left(TimeBudget::Clock::now()), 40.0);
}

TEST(TimeBudget, ASlurmJobWithoutAnEndTimeHasNoLimitButTheBudget) {
  const auto start = TimeBudget::Clock::now();
  for (const char* none : {"N/A", "Unknown", "NONE", "  \n", "garbage"}) {
    Answering slurm{std::string(none)};
    EXPECT_FALSE(make_time_budget(start, std::nullopt, std::nullopt, slurm_job("42"), slurm.query())
                     .limited())
        << none;
    EXPECT_EQ(make_time_budget(start, 40.0, std::nullopt, slurm_job("42"), slurm.query()).source(),
              "--time-budget 40 s")
        << none;
  }
}

}  // namespace
}  // namespace epochrun
