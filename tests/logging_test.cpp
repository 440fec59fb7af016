#include <gtest/gtest.h>

#include "epochrun/errors.hpp"
#include "epochrun/logging.hpp"

namespace epochrun {
namespace {

TEST(Logging, EveryDocumentedLevelParses) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::kTrace);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("off"), LogLevel::kOff);
  EXPECT_THROW(parse_log_level("loud"), UsageError);
  EXPECT_THROW(parse_log_level(""), UsageError);
}

// A process running several jobs (a Python script calling epochrun.run twice, another rank
// count of a split communicator) configures the logger once per run.
TEST(Logging, ConfiguresAgainForALaterRun) {
  configure_logging(0, LogLevel::kWarn);
  EXPECT_NO_THROW(configure_logging(0, LogLevel::kInfo));
  EXPECT_NO_THROW(configure_logging(1, LogLevel::kInfo));
  configure_logging(0, LogLevel::kWarn);
}

}  // namespace
}  // namespace epochrun
