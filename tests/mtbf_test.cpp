// --mtbf HOURS and --checkpoint-every auto with sgd_regression on 3 ranks: after the first
// checkpoint the run prints the Young/Daly interval from that checkpoint's measured cost (the
// printed figures agree with Daly's formula), and auto checkpoints by it: a failure rate so low
// that the interval outlasts the run saves only init and the last epoch, one so high that it is
// shorter than an epoch saves every epoch; bad values exit 2 with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "small_sgd_run.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

ProcessResult run_sgd(const std::vector<std::string>& extra, const ScratchDir& cwd) {
  auto args = extra;
  args.insert(args.end(), {"--log-level", "info"});
  return run_bounded(small_sgd(args), cwd.path());
}

TEST(Mtbf, ThePrintedIntervalIsDalysForTheMeasuredCost) {
  ScratchDir cwd;
  auto result = run_sgd({"--mtbf", "2"}, cwd);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto all = result.out + result.err;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(all, found,
                                std::regex("a checkpoint costs the job ([0-9.]+) s \\(epoch 0's "
                                           "save.*Young/Daly checkpoint interval is ([0-9.]+) s")))
      << all;
  const double cost = std::stod(found[1]);
  const double interval = std::stod(found[2]);
  const double mtbf = 2 * 3600.0;
  const double ratio = cost / (2 * mtbf);
  const double daly = std::sqrt(2 * cost * mtbf) * (1 + std::sqrt(ratio) / 3 + ratio / 9) - cost;
  EXPECT_NEAR(interval, daly, 0.03 * daly + 0.1) << all;
  // Without auto, the policy is the default: every epoch.
  EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Mtbf, AutoCheckpointsByTheInterval) {
  {
    ScratchDir cwd;
    auto rare = run_sgd({"--mtbf", "1000000", "--checkpoint-every", "auto"}, cwd);
    ASSERT_EQ(rare.exit_code, 0) << rare.err;
    EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(), (std::vector<std::int64_t>{0, 5}));
    EXPECT_NE((rare.out + rare.err).find("checkpoint skipped (--checkpoint-every auto)"),
              std::string::npos);
  }
  {
    ScratchDir cwd;
    // An interval of 3.6 ns (the MTBF itself, as the cost is more than twice it): every epoch takes
    // longer, on every rank.
    auto frequent = run_sgd({"--mtbf", "0.000000000001", "--checkpoint-every", "auto"}, cwd);
    ASSERT_EQ(frequent.exit_code, 0) << frequent.err;
    EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(),
              (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  }
}

TEST(Mtbf, BadValuesAreRefusedWithOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--checkpoint-every", "auto"}, "--checkpoint-every auto needs --mtbf"},
      {{"--mtbf", "0"}, "--mtbf must be"},
      {{"--mtbf", "-1"}, "--mtbf must be"},
      {{"--checkpoint-every", "often"}, "--checkpoint-every must be a whole number"},
      {{"--checkpoint-every", "0"}, "--checkpoint-every must be at least 1, got 0"},
  };
  for (const auto& [args, why] : cases) {
    SCOPED_TRACE(why);
    ScratchDir cwd;
    auto result = run_bounded(small_sgd(args), cwd.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    const auto lines = error_lines(result);
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_NE(lines[0].find(why), std::string::npos) << lines[0];
  }
}

}  // namespace
}  // namespace epochrun::testing
