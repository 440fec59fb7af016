// What another host's file-system client may keep of a checkpoint while it is being written.
// On GlusterFS with its default options a host that only looked a small checkpoint file up
// (opened it) while rank 0 was writing it kept the content of that moment and served it for
// minutes after the commit, to every reader on that host, even past a drop of the kernel's
// caches: the bytes of rank 0's replicated values read as zeros there (seen about once in 400
// saves on the hosts of tests/clusters/multihost; docs/CLUSTERS.md). A client drops such a copy
// when its own host writes to the file, or when it sees the modification time change. So: a rank
// with nothing to write never opens the file, and rank 0 marks it modified after every rank's bytes
// are durable and before the rename. The race itself is too rare to catch in a test; these tests
// watch the system calls (strace) that close it, on one host. The same traces show in what order
// the ranks' writes of a collective save reach the file against their fsyncs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// One traced system call: the thread that made it and the call as strace -y printed it.
struct Call {
  std::string thread;
  std::string text;
};

// What the last traced run printed on its standard error, for a failure's message.
std::string& last_run_errors() {
  static std::string err;
  return err;
}

// The calls most tests trace: those by which a rank opens, syncs, marks and commits a file.
constexpr const char* kCommitCalls = "openat,utimensat,fsync,rename";

// Runs `args` on 3 ranks under strace -f (every rank is a child of mpiexec), tracing the
// system calls `traced` (strace's -e trace=), and returns them in order (a call another thread
// interrupts is its "<unfinished ...>" line, where it began).
std::vector<Call> traced_once(const std::vector<std::string>& args, const std::string& traced) {
  ScratchDir cwd;
  const auto trace = cwd / "trace";
  std::vector<std::string> argv = {STRACE_BINARY, "-f",           "-y", "-qq",
                                   "-o",          trace.string(), "-e", "trace=" + traced};
  const auto launched = epochrun_on_ranks(3, args);
  argv.insert(argv.end(), launched.begin(), launched.end());
  const auto result = run_within(argv, cwd.path(), 240);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  last_run_errors() = result.err;
  std::vector<Call> calls;
  std::istringstream lines(read_file(trace));
  for (std::string line; std::getline(lines, line);) {
    // strace pads the pid to 5 columns ("9207  openat(..."): pids under 10,000, as on a
    // freshly booted machine, are followed by more than one space.
    const auto space = line.find(' ');
    const auto text = line.find_first_not_of(' ', space);
    if (space != std::string::npos && text != std::string::npos) {
      calls.push_back({line.substr(0, space), line.substr(text)});
    }
  }
  return calls;
}

// Whether the trace holds calls of the ranks: a checkpoint file named by some call.
bool ranks_traced(const std::vector<Call>& calls) {
  return std::any_of(calls.begin(), calls.end(), [](const Call& call) {
    return call.text.find("epoch-00000") != std::string::npos;
  });
}

// The traced calls that name a checkpoint and the last run's standard error, for a failure's
// message.
std::string what_was_traced(const std::vector<Call>& calls) {
  std::string named;
  int shown = 0;
  for (const auto& call : calls) {
    if (call.text.find("epoch-00000") != std::string::npos && shown++ < 40) {
      named += call.thread + " " + call.text + "\n";
    }
  }
  return named + "standard error:\n" + last_run_errors();
}

std::vector<Call> traced_run(const std::vector<std::string>& args,
                             const std::string& traced = kCommitCalls) {
  auto calls = traced_once(args, traced);
  if (!ranks_traced(calls)) {
    // A trace without any call naming a checkpoint says nothing about who opens it (strace
    // may have failed to follow the ranks): trace once more, and say so.
    std::cout << "the trace holds no call naming a checkpoint (" << calls.size()
              << " calls); tracing once more\n";
    calls = traced_once(args, traced);
  }
  if (!ranks_traced(calls)) {
    std::string first;
    for (std::size_t i = 0; i < std::min<std::size_t>(calls.size(), 5); ++i) {
      first += calls[i].thread + " " + calls[i].text + "\n";
    }
    ADD_FAILURE() << "strace followed none of the ranks (" << calls.size() << " calls):\n" << first;
  }
  return calls;
}

// The temporary file of epoch `epoch`'s save (".epoch-00000N.h5.tmp.<pid>.<hex>") named in
// `text`, or "" when it names none.
std::string temporary_in(const std::string& text, int epoch) {
  const std::string name = ".epoch-00000" + std::to_string(epoch) + ".h5.tmp.";
  const auto at = text.find(name);
  if (at == std::string::npos) {
    return "";
  }
  const auto end = text.find_first_of("\">", at);
  return text.substr(at, end - at);
}

// The threads that opened epoch `epoch`'s temporary file.
std::set<std::string> threads_opening(const std::vector<Call>& calls, int epoch) {
  std::set<std::string> threads;
  for (const auto& call : calls) {
    if (call.text.starts_with("openat(") && !temporary_in(call.text, epoch).empty() &&
        call.text.find(" = -1") == std::string::npos) {
      threads.insert(call.thread);
    }
  }
  return threads;
}

std::vector<std::string> sgd_regression(int epochs) {
  auto options = small_sgd_regression_options(epochs);
  options.insert(options.begin(), "run");
  options.insert(options.end(), {"--checkpoint-dir", "ck"});
  return options;
}

std::vector<std::string> sum_pipeline(int epochs) {
  return {"run",
          "--job",
          "sum_pipeline",
          "--num-epochs",
          std::to_string(epochs),
          "--checkpoint-dir",
          "ck",
          "--log-level",
          "warn"};
}

// Each save of epochs 0 to 2 had its temporary file opened by `processes` processes.
void expect_each_save_opened_by(const std::vector<Call>& calls, std::size_t processes) {
  for (int epoch = 0; epoch <= 2; ++epoch) {
    EXPECT_EQ(threads_opening(calls, epoch).size(), processes) << "epoch " << epoch << "\n"
                                                               << what_was_traced(calls);
  }
}

// sgd_regression keeps only replicated blobs, which rank 0 writes: rank 0 alone opens each
// save's file (before, every rank opened it for a data step with nothing to write).
TEST(ClientCache, RanksWithNothingToWriteNeverOpenTheFile) {
  expect_each_save_opened_by(traced_run(sgd_regression(2)), 1);
}

// A job with per-node blobs: every rank has its values to write, so every rank opens the file
// (and its write drops whatever its client cached).
TEST(ClientCache, RanksWithValuesOpenTheFile) {
  expect_each_save_opened_by(traced_run(sum_pipeline(2)), 3);
}

// sum_pipeline's per-node blobs are a few bytes each: no rank opens a second, direct descriptor
// of the file for them (every rank did, on every synchronous save, once those saves wrote large
// page-aligned blobs with direct I/O).
TEST(ClientCache, ASaveOfSmallBlobsOpensNoDirectDescriptor) {
  const auto calls = traced_run(sum_pipeline(2));
  std::size_t opens = 0;
  for (const auto& call : calls) {
    for (int epoch = 0; epoch <= 2; ++epoch) {
      if (call.text.starts_with("openat(") && !temporary_in(call.text, epoch).empty()) {
        ++opens;
        EXPECT_EQ(call.text.find("O_DIRECT"), std::string::npos) << call.text;
      }
    }
  }
  EXPECT_GT(opens, 0u) << what_was_traced(calls);
}

// Rank 0 sets the file's modification time after the last fsync of it by any rank and before
// the rename that commits it.
TEST(ClientCache, TheCommitMarksTheFileModifiedAfterEveryRanksBytes) {
  const auto calls = traced_run(sum_pipeline(2));
  for (int epoch = 0; epoch <= 2; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    std::optional<std::size_t> last_fsync;
    std::optional<std::size_t> marked;
    std::optional<std::size_t> renamed;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto& text = calls[i].text;
      if (temporary_in(text, epoch).empty()) {
        continue;
      }
      if (text.starts_with("fsync(")) {
        last_fsync = i;
      } else if (text.starts_with("utimensat(")) {
        marked = i;
      } else if (text.starts_with("rename(")) {
        renamed = i;
      }
    }
    ASSERT_TRUE(last_fsync && renamed) << "no fsync or rename of the temporary file traced\n"
                                       << what_was_traced(calls);
    ASSERT_TRUE(marked) << "the file was never marked modified";
    EXPECT_GT(*marked, *last_fsync);
    EXPECT_LT(*marked, *renamed);
  }
}

// The byte count of a traced pwrite64 call, past its (escaped, perhaps cut) buffer.
std::optional<std::uint64_t> bytes_written_by(const std::string& text) {
  static const std::regex pwrite(
      R"re(^pwrite64\(\d+<[^>]*>, "(?:[^"\\]|\\.)*"(?:\.\.\.)?, (\d+),)re");
  std::smatch match;
  if (!std::regex_search(text, match, pwrite)) {
    return std::nullopt;
  }
  return std::stoull(match[1].str());
}

// A global array written with collective MPI-IO: every rank writes its block's checksum into
// the file before the collective write, so that no rank's checksum lands after the first
// block's bytes. No rank leaves the collective write before every rank has entered it, so no
// checksum can dirty the file's pages again once a rank has begun to fsync them. Written after
// its block, each rank's checksum came between the other ranks' fsyncs, and each of those
// fsyncs wrote the page once more (at 96 ranks a quarter of the save's sync).
TEST(ClientCache, ACollectiveSaveWritesEveryChecksumBeforeAnyBlock) {
  // 96 x 64 f64 cells in bands of 32 rows: 16,384 bytes a block.
  constexpr std::uint64_t kBlockBytes = 16384;
  const auto calls =
      traced_run({"run", "--job", "heat_diffusion", "--heat_diffusion.rows", "96",
                  "--heat_diffusion.columns", "64", "--heat_diffusion.max_epochs", "2",
                  "--array-io", "mpiio", "--checkpoint-dir", "ck", "--log-level", "warn"},
                 "openat,pwrite64,fsync");
  for (int epoch = 0; epoch <= 2; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    std::size_t blocks = 0;
    for (const auto& call : calls) {
      const auto bytes = bytes_written_by(call.text);
      if (!bytes || temporary_in(call.text, epoch).empty()) {
        continue;
      }
      if (*bytes == kBlockBytes) {
        ++blocks;
      } else if (blocks > 0 && *bytes == 8) {
        ADD_FAILURE() << "a checksum written after a block: " << call.thread << " " << call.text;
      }
    }
    EXPECT_EQ(blocks, 3u) << what_was_traced(calls);
  }
}

}  // namespace
}  // namespace epochrun::testing
