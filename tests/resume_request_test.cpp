#include <gtest/gtest.h>

#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"

namespace epochrun {
namespace {

TEST(ResumeRequest, ParsesEpochsAndLatestOnly) {
  EXPECT_EQ(ResumeRequest::parse("latest").kind, ResumeRequest::Kind::kLatest);
  auto explicit_epoch = ResumeRequest::parse("12");
  EXPECT_EQ(explicit_epoch.kind, ResumeRequest::Kind::kEpoch);
  EXPECT_EQ(explicit_epoch.epoch, 12);
  for (const char* bad : {"", "-1", "1.5", "last", "12abc", "99999999999999999999"}) {
    EXPECT_THROW(ResumeRequest::parse(bad), UsageError) << bad;
  }
}

}  // namespace
}  // namespace epochrun
