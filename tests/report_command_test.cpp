// `epochrun report DIR`: the timeline of DIR/metrics.jsonl as SVG, as a user runs it. The log
// is written by hand in the format every run appends, with what a reader meets in practice:
// two runs, a resume's load, asynchronous save completions, fields and events of a later
// version, a damaged line and a torn last line; and written by real runs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

namespace fs = std::filesystem;

ProcessResult bounded(const std::vector<std::string>& argv, const fs::path& cwd) {
  return run_within(argv, cwd, 120);
}

ProcessResult report(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv = {EPOCHRUN_BINARY, "report"};
  argv.insert(argv.end(), args.begin(), args.end());
  return bounded(argv, cwd);
}

std::string epoch_line(const std::string& run, int epoch, bool synchronous) {
  auto ranks = nlohmann::json::array();
  for (int rank = 0; rank < 3; ++rank) {
    nlohmann::json figures = {{"rank", rank},
                              {"epoch_seconds", 0.25 + 0.01 * rank},
                              {"blocked_seconds", synchronous ? 0.05 : 0.002},
                              {"peak_rss_bytes", 40000000 + rank},
                              {"a_later_field", "ignored"}};
    if (synchronous) {
      figures["save_seconds"] = 0.05;
      figures["save_bytes"] = 123456;
    }
    ranks.push_back(figures);
  }
  return nlohmann::json{
             {"run_started", run}, {"event", "epoch"}, {"epoch", epoch}, {"ranks", ranks}}
             .dump() +
         "\n";
}

std::string event_line(const std::string& run, const std::string& event, int epoch,
                       const std::string& seconds_key, const std::string& bytes_key) {
  auto ranks = nlohmann::json::array();
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back({{"rank", rank}, {seconds_key, 0.125}, {bytes_key, 777777}});
  }
  nlohmann::json line = {
      {"run_started", run}, {"event", event}, {"epoch", epoch}, {"ranks", ranks}};
  if (event == "save") {
    line["committed"] = true;
  }
  return line.dump() + "\n";
}

// Run 1: epochs 0..4, synchronous. Run 2: resumed from 4, epochs 5..7 asynchronous.
std::string two_runs() {
  const std::string first = "2026-11-23T10:00:00Z";
  const std::string second = "2026-11-23T11:00:00Z";
  std::string log;
  for (int epoch = 0; epoch <= 4; ++epoch) {
    log += epoch_line(first, epoch, true);
  }
  log += event_line(second, "load", 4, "load_seconds", "load_bytes");
  for (int epoch = 5; epoch <= 7; ++epoch) {
    log += epoch_line(second, epoch, false);
    log += event_line(second, "save", epoch, "save_seconds", "save_bytes");
  }
  log += R"({"run_started":")" + second +
         R"(","event":"a_later_event","epoch":7})"
         "\n";
  return log;
}

class Report : public ::testing::Test {
 protected:
  void write_log(const std::string& content) {
    fs::create_directory(cwd_ / "D");
    write_file(cwd_ / "D" / "metrics.jsonl", content);
  }
  // The ids of the SVG's elements, read with Python's XML parser (so it must be well-formed).
  std::vector<std::string> svg_ids(const fs::path& svg) {
    auto parsed = bounded({SYSTEM_PYTHON, "-c",
                           "import sys, xml.dom.minidom\n"
                           "d = xml.dom.minidom.parse(sys.argv[1])\n"
                           "for g in d.getElementsByTagName('g'): print(g.getAttribute('id'))\n",
                           svg.string()},
                          cwd_.path());
    EXPECT_EQ(parsed.exit_code, 0) << parsed.err;
    std::vector<std::string> ids;
    std::istringstream lines(parsed.out);
    for (std::string line; std::getline(lines, line);) {
      ids.push_back(line);
    }
    return ids;
  }
  ScratchDir cwd_;
};

TEST_F(Report, EveryEpochOfEveryRunIsInTheTimeline) {
  write_log(two_runs() + R"({"run_started":"2026-11-23T11:00:00Z","event":"epo)");  // torn
  auto result = report({"D", "-o", "t.svg"}, cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "") << "a torn last line is skipped silently";
  EXPECT_EQ(svg_ids(cwd_ / "t.svg"),
            (std::vector<std::string>{"run1-epoch0", "run1-epoch1", "run1-epoch2", "run1-epoch3",
                                      "run1-epoch4", "run2-load", "run2-epoch5", "run2-epoch6",
                                      "run2-epoch7"}));
  const auto svg = read_file(cwd_ / "t.svg");
  EXPECT_NE(svg.find("<title>epoch 6 (checkpoint committed)</title>"), std::string::npos);
  EXPECT_NE(svg.find("rank 2, epoch 6: work 0.270 s, blocked 0.002 s, save 0.125 s (0.8 MB), "
                     "peak RSS 40.0 MB"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("rank 1: load 0.125 s (0.8 MB)"), std::string::npos);
  EXPECT_NE(svg.find("resumed from epoch 4"), std::string::npos);
  EXPECT_NE(result.out.find("run 1, started 2026-11-23T10:00:00Z: 5 epochs on 3 ranks; medians "
                            "of the slowest rank: work 0.270 s, blocked 0.050 s, save 0.050 s"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("timeline written to t.svg"), std::string::npos);

  auto to_stdout = report({"D", "-o", "-"}, cwd_.path());
  ASSERT_EQ(to_stdout.exit_code, 0);
  EXPECT_EQ(to_stdout.out, svg);
}

// Real runs on 3 ranks, one resumed: every epoch every run recorded, and the resume's load,
// are in the timeline.
TEST_F(Report, RealRunsAreDrawnEpochByEpoch) {
  auto options = small_sgd_regression_options(5);
  options.insert(options.begin(), {"run", "--checkpoint-dir", "D"});
  auto first = options;
  first.insert(first.end(), {"--num-epochs", "3"});
  ASSERT_EQ(bounded(epochrun_on_ranks(3, first), cwd_.path()).exit_code, 0);
  options.insert(options.end(), {"--resume-from-epoch", "latest"});
  ASSERT_EQ(bounded(epochrun_on_ranks(3, options), cwd_.path()).exit_code, 0);

  std::vector<std::string> expected;
  std::string run;
  int runs = 0;
  std::istringstream lines(read_file(cwd_ / "D" / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["run_started"] != run) {
      run = record["run_started"];
      ++runs;
    }
    const auto prefix = "run" + std::to_string(runs);
    if (record["event"] == "epoch") {
      expected.push_back(prefix + "-epoch" + record["epoch"].dump());
    } else if (record["event"] == "load") {
      expected.push_back(prefix + "-load");
    }
  }
  EXPECT_EQ(expected,
            (std::vector<std::string>{"run1-epoch0", "run1-epoch1", "run1-epoch2", "run1-epoch3",
                                      "run2-load", "run2-epoch4", "run2-epoch5"}));
  auto result = report({"D", "-o", "t.svg"}, cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(svg_ids(cwd_ / "t.svg"), expected);
}

TEST_F(Report, ADamagedLineIsSkippedWithOneWarning) {
  auto log = two_runs();
  log.insert(log.find('\n') + 1, "this is not json\n");
  write_log(log);
  auto result = report({"D"}, cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err_lines(), (std::vector<std::string>{"epochrun: warning: skipped 1 damaged "
                                                          "line(s) of D/metrics.jsonl"}));
  EXPECT_EQ(svg_ids(cwd_ / "timeline.svg").size(), 9u);
}

TEST_F(Report, BadInputIsOneLineExitTwoAndWritesNothing) {
  fs::create_directory(cwd_ / "empty");
  write_file(cwd_ / "file", "x");
  // Nothing writes into it: a read would wait forever.
  fs::create_directory(cwd_ / "fifo");
  ASSERT_EQ(::mkfifo((cwd_ / "fifo" / "metrics.jsonl").c_str(), 0600), 0);
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "report needs a checkpoint directory"},
           {{"missing"}, "'missing' is not a directory"},
           {{"file"}, "'file' is not a directory"},
           {{"empty"}, "cannot read empty/metrics.jsonl"},
           {{"fifo"}, "cannot read fifo/metrics.jsonl: not a regular file"},
           {{"empty", "--frobnicate"}, "frobnicate"},
       }) {
    auto result = report(args, cwd_.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    ASSERT_EQ(result.err_lines().size(), 1u) << result.err;
    EXPECT_EQ(result.err_lines()[0].rfind("epochrun: error: ", 0), 0u) << result.err;
    EXPECT_NE(result.err_lines()[0].find(says), std::string::npos) << result.err;
  }
  write_log(two_runs());
  auto result = report({"D", "-o", "no_such_dir/t.svg"}, cwd_.path());
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("-o no_such_dir/t.svg"), std::string::npos) << result.err;
  EXPECT_EQ(list_directory(cwd_.path()), (std::vector<std::string>{"D", "empty", "fifo", "file"}));
  EXPECT_EQ(list_directory(cwd_ / "D"), std::vector<std::string>{"metrics.jsonl"});
}

}  // namespace
}  // namespace epochrun::testing
