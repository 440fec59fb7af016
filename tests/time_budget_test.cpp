#include "time_budget.hpp"

#include <gtest/gtest.h>

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

TEST(TimeBudget, TheBudgetCountsFromTheProgramStartAndSlurmDefaultsTheMargin) {
  const auto start = TimeBudget::Clock::now() - seconds(30);
  const auto budget = make_time_budget(start, 40.0, std::nullopt, SlurmEnvironment{});
  ASSERT_TRUE(budget.limited());
  EXPECT_LE(budget.seconds_left(TimeBudget::Clock::now()), 10.0);
  EXPECT_EQ(budget.margin_seconds(), 0.0);
  EXPECT_FALSE(make_time_budget(start, std::nullopt, 5.0, SlurmEnvironment{}).limited());
  // Under SLURM, for a job squeue does not know (or with no controller to ask): a warning, and
  // --time-budget alone counts, with the SLURM default margin.
  SlurmEnvironment slurm;
  slurm.job_id = "999999";
  const auto under_slurm = make_time_budget(start, 40.0, std::nullopt, slurm);
  EXPECT_EQ(under_slurm.source(), "--time-budget 40 s");
  EXPECT_EQ(under_slurm.margin_seconds(), 60.0);
}

}  // namespace
}  // namespace epochrun
