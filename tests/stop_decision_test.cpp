#include <gtest/gtest.h>

#include <string>

#include "epochrun/stop_decision.hpp"

namespace epochrun {
namespace {

TEST(StopDecision, OnlyPreemptionAndTimeLimitInterruptTheJob) {
  for (auto kind : {StopKind::kStopCondition, StopKind::kEpochLimit, StopKind::kAlreadyStopped}) {
    EXPECT_TRUE((StopDecision{kind, "x"}).finishes_job()) << stop_kind_name(kind);
  }
  for (auto kind : {StopKind::kPreempted, StopKind::kTimeLimit}) {
    EXPECT_TRUE((StopDecision{kind, "x"}).interrupted()) << stop_kind_name(kind);
    EXPECT_FALSE((StopDecision{kind, "x"}).finishes_job()) << stop_kind_name(kind);
  }
  EXPECT_FALSE(StopDecision{}.stops());
  EXPECT_EQ(std::string(stop_kind_name(StopKind::kTimeLimit)), "time_limit");
}

}  // namespace
}  // namespace epochrun
