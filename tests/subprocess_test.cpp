#include "subprocess.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace epochrun {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(CommandOutput, ReturnsWhatTheCommandPrintsOnItsStandardOutputOnly) {
  const auto output = command_output({"sh", "-c", "echo hello; echo ignored >&2; echo world"},
                                     milliseconds(10'000));
  ASSERT_TRUE(output.has_value());
  EXPECT_EQ(*output, "hello\nworld\n");
}

TEST(CommandOutput, ACommandThatFailsOrCannotStartHasNoOutput) {
  EXPECT_FALSE(command_output({"sh", "-c", "echo partial; exit 3"}, milliseconds(10'000)));
  EXPECT_FALSE(command_output({"sh", "-c", "kill -9 $$"}, milliseconds(10'000)));
  EXPECT_FALSE(command_output({"/nonexistent/epochrun-no-such-program"}, milliseconds(10'000)));
}

// The bound holds whatever the command does: go on printing nothing, or close its output and go
// on running (no end of file tells then that it is done).
TEST(CommandOutput, ACommandThatOutlivesItsBoundIsKilledInTime) {
  for (const char* script : {"echo started; sleep 30", "exec >&-; sleep 30"}) {
    const auto start = Clock::now();
    const auto output = command_output({"sh", "-c", script}, milliseconds(500));
    const auto took = Clock::now() - start;
    EXPECT_FALSE(output.has_value()) << script << ": " << *output;
    EXPECT_LT(took, std::chrono::seconds(5)) << script;
  }
}

}  // namespace
}  // namespace epochrun
