// The node-local levels (--local-dir with --flush-every, --flush-interval, --local-keep) with
// sgd_regression on 3 ranks, one host: the checkpoints the schedule does not pick stay
// node-local, committed by a manifest in the checkpoint directory; the flushed ones are the
// synchronous run's; retention keeps the newest --local-keep epochs' copies and manifests; a
// resume loads the newest recoverable epoch (node-local, verified byte by byte, or the newest
// flushed one, saying what that costs) and ends bit-identical; a rank change falls back to a
// flushed epoch; a stop flushes; a full node-local file system degrades to flushing every
// checkpoint, and one that fills mid-run is left with nothing of the level once an epoch is
// flushed; a rank change deletes the files of the ranks it no longer has; a missing --local-dir
// is created; bad values are refused with one line and exit 2. On three hosts (three_hosts.hpp):
// a host lost while an exchange is unfinished costs only that exchange's epoch; metadata files
// that read as terabytes are judged damaged, never read; a copy that vanishes before its manifest
// fails the save on every rank; a run sharing --local-dir with a killed one ends.
// No wait here depends on a timing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "epochrun/blob_file.hpp"
#include "local_copy_files.hpp"
#include "small_sgd_run.hpp"
#include "test_support.hpp"
#include "three_hosts.hpp"

namespace epochrun::testing {
namespace {

std::string manifest_name(std::int64_t epoch) {
  char name[64];
  std::snprintf(name, sizeof name, "epoch-%06lld.local.json", static_cast<long long>(epoch));
  return name;
}

// The lines of `file` as JSON objects.
std::vector<nlohmann::json> json_lines(const std::filesystem::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      lines.push_back(nlohmann::json::parse(line));
    }
  }
  return lines;
}

class LocalLevels : public ComparedWithSynchronousRun {
 protected:
  ProcessResult run(const std::vector<std::string>& extra,
                    const std::map<std::string, std::string>& environment = kMpiEnvironment) {
    std::vector<std::string> args = {"--local-dir", "L", "--log-level", "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_bounded(small_sgd(args), cwd_.path(), environment);
  }

  // A run killed (rank 1, SIGKILL) after epoch 4 ran, before its save: epoch 0 flushed, 1 to 3
  // node-local.
  void run_killed_after_epoch_3(const std::vector<std::string>& extra) {
    auto args = std::vector<std::string>{"--flush-every", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto killed = run(args, with_fault("epoch@4:1:KILL"));
    ASSERT_NE(killed.exit_code, 0) << killed.err;
    ASSERT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), (std::vector<std::int64_t>{0}));
  }

  // A preemption signal (SIGUSR1 to rank 1, paused in epoch 3) with --flush-every 10 and
  // `extra`: the run stops with exit 75 and flushes epoch 3, the synchronous run's.
  void stop_in_epoch_3(const std::vector<std::string>& extra) {
    auto args = std::vector<std::string>{"--local-dir", "L", "--flush-every", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    ChildProcess job(small_sgd(args), cwd_.path(), with_fault("epoch-task@3:1:STOP"));
    const auto paused = wait_for_a_stopped_child(job);
    ASSERT_TRUE(paused.has_value()) << "no rank paused";
    ::kill(*paused, SIGUSR1);
    ::kill(*paused, SIGCONT);
    const auto result = job.wait(kSmallSgdRunSeconds);
    ASSERT_TRUE(result.has_value()) << "the job did not end";
    EXPECT_EQ(result->exit_code, 75) << result->err;
    EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
              (std::vector<std::int64_t>{0, 3}));
    EXPECT_EQ(epoch_of(cwd_.path(), 3), epoch_of(sync_->path(), 3));
  }

  // Resumed with --flush-every `flush_every`: the run loads node-local epoch 3, flushes its
  // first checkpoint (epoch 4: how many node-local ones came before 3 it cannot know) and its
  // last, and ends bit-identical.
  void resume_from_node_local_epoch_3(const std::string& flush_every) {
    auto resumed = run({"--flush-every", flush_every, "--resume-from-epoch", "latest",
                        "--summary-json", "s.json"});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto all = resumed.out + resumed.err;
    EXPECT_NE(all.find("resumed job sgd_regression from node-local epoch 3"), std::string::npos)
        << all;
    expect_end_as_synchronous();
    const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
    EXPECT_EQ(summary["resumed_from"], 3);
    EXPECT_EQ(summary["resumed_from_level"], "node-local");
    EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json({4, 5})) << summary;
  }

  std::vector<std::string> files_in(const std::string& dir, const std::string& ending) const {
    std::vector<std::string> found;
    for (const auto& name : list_directory(cwd_ / dir)) {
      if (name.size() >= ending.size() &&
          name.compare(name.size() - ending.size(), ending.size(), ending) == 0) {
        found.push_back(name);
      }
    }
    std::sort(found.begin(), found.end());
    return found;
  }

  // The run ended as the synchronous one: last epoch and exported model.
  void expect_end_as_synchronous() {
    EXPECT_EQ(epoch_of(cwd_.path(), kSmallSgdLastEpoch),
              epoch_of(sync_->path(), kSmallSgdLastEpoch));
    EXPECT_EQ(read_blob_file(cwd_ / "model.h5"), read_blob_file(sync_->path() / "model.h5"));
  }

  ScratchDir cwd_;
};

// --flush-every 3: epochs 0 (the first), 3 and 5 (the last) flushed, each the synchronous run's;
// 1, 2 and 4 node-local, in the summary and metrics as such; at the end the newest epoch's copies
// alone are kept (--local-keep 1), and no manifest is left (the newest epoch is flushed).
TEST_F(LocalLevels, FlushEveryNthKeepsTheOthersNodeLocal) {
  auto result = run({"--flush-every", "3", "--summary-json", "s.json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 3, 5}));
  for (auto epoch : {0, 3, 5}) {
    EXPECT_EQ(epoch_of(cwd_.path(), epoch), epoch_of(sync_->path(), epoch)) << epoch;
  }
  expect_end_as_synchronous();
  const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
  EXPECT_EQ(summary["node_local_checkpoints"], nlohmann::json({1, 2, 4})) << summary;
  EXPECT_EQ(summary["committed_checkpoints"], nlohmann::json({0, 3, 5})) << summary;
  const auto& levels_timed = summary["save_levels"];
  EXPECT_EQ(levels_timed["node-local"]["saves"], 3) << summary;
  EXPECT_EQ(levels_timed["flushed"]["saves"], 3) << summary;
  for (const auto* level : {"node-local", "flushed"}) {
    EXPECT_GT(levels_timed[level]["seconds"].get<double>(), 0.0) << level;
    EXPECT_GT(levels_timed[level]["blocked_seconds"].get<double>(), 0.0) << level;
  }
  std::map<std::int64_t, std::string> levels;
  for (const auto& line : json_lines(cwd_ / "D" / "metrics.jsonl")) {
    if (line.contains("level")) {
      levels[line["epoch"].get<std::int64_t>()] = line["level"].get<std::string>();
    }
  }
  EXPECT_EQ(levels[2], "node-local");
  EXPECT_EQ(levels[4], "node-local");
  EXPECT_EQ(levels[3], "flushed");
  EXPECT_TRUE(files_in("D", ".local.json").empty());
  EXPECT_EQ(files_in("L", ".local"),
            (std::vector<std::string>{copy_of(cwd_.path(), 5, 0).filename().string(),
                                      copy_of(cwd_.path(), 5, 1).filename().string(),
                                      copy_of(cwd_.path(), 5, 2).filename().string()}));
  EXPECT_NE((result.out + result.err).find("checkpoint saved node-local in L"), std::string::npos);
}

// --flush-interval alone, longer than the run: only the first and the last are flushed.
TEST_F(LocalLevels, AFlushIntervalAloneFlushesByTime) {
  auto result = run({"--flush-interval", "3600"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), (std::vector<std::int64_t>{0, 5}));
  expect_end_as_synchronous();
}

// Killed after epoch 3 with --local-keep 2: the manifests and copies of epochs 2 and 3 are kept,
// and inspect lists them; the resume loads node-local epoch 3, flushes its first checkpoint
// (epoch 4: how many node-local ones came before 3 the run cannot know), and ends bit-identical.
TEST_F(LocalLevels, AResumeLoadsTheNewestNodeLocalEpochAndEndsExact) {
  run_killed_after_epoch_3({"--local-keep", "2"});
  EXPECT_EQ(files_in("D", ".local.json"),
            (std::vector<std::string>{manifest_name(2), manifest_name(3)}));
  const auto copies = files_in("L", ".local");
  EXPECT_EQ(std::count_if(copies.begin(), copies.end(),
                          [](const std::string& name) { return name.starts_with("epoch-"); }),
            6);
  auto listed = run_bounded({EPOCHRUN_BINARY, "inspect", "D", "--json"}, cwd_.path(), {});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto listing = nlohmann::json::parse(listed.out);
  ASSERT_EQ(listing["node_local_epochs"].size(), 2u) << listing;
  EXPECT_EQ(listing["node_local_epochs"][1]["epoch"], 3);
  EXPECT_EQ(listing["node_local_epochs"][1]["flushed"], false);
  EXPECT_EQ(listing["node_local_epochs"][1]["hosts"].size(), 1u);
  auto text = run_bounded({EPOCHRUN_BINARY, "inspect", "D"}, cwd_.path(), {});
  EXPECT_NE(text.out.find("node-local epochs in D: 2"), std::string::npos) << text.out;

  resume_from_node_local_epoch_3("10");
}

// Killed while epoch 3 is flushed (--flush-every 3; rank 1 killed after epoch 4 ran, before the
// epoch boundary that commits the flush): epoch 3 was committed node-local when its copies were
// agreed, so the resume loads it, not node-local epoch 2 (two epochs lost), and ends
// bit-identical.
TEST_F(LocalLevels, AKillDuringAFlushResumesFromTheEpochBeingFlushed) {
  auto killed = run({"--flush-every", "3"}, with_fault("epoch@4:1:KILL"));
  ASSERT_NE(killed.exit_code, 0) << killed.err;
  ASSERT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(files_in("D", ".local.json"),
            (std::vector<std::string>{manifest_name(2), manifest_name(3)}));

  resume_from_node_local_epoch_3("3");
  // Each flushed epoch's manifest went with its commit.
  EXPECT_TRUE(files_in("D", ".local.json").empty());
}

// An explicit --resume-from-epoch of a node-local epoch loads it; of one whose copy is gone it
// fails with exit 3 and loads nothing else.
TEST_F(LocalLevels, AnExplicitNodeLocalEpochLoadsOrFails) {
  run_killed_after_epoch_3({"--local-keep", "2"});
  std::filesystem::remove(copy_of(cwd_.path(), 2, 2));
  auto refused = run({"--flush-every", "10", "--resume-from-epoch", "2"});
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_NE(refused.err.find("rank 2: the node-local copy written on"), std::string::npos)
      << refused.err;
  auto resumed = run({"--flush-every", "10", "--resume-from-epoch", "3"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("from node-local epoch 3"), std::string::npos);
  expect_end_as_synchronous();
}

// Rank 1's copy of epoch 3 deleted, then (another run) one byte of it damaged: epoch 3 is not
// recoverable, the resume says so with what it costs, falls back (to node-local epoch 2 with
// --local-keep 2; to flushed epoch 0 with --local-keep 1), records it in runs.jsonl, and ends
// bit-identical.
TEST_F(LocalLevels, AMissingOrDamagedCopyFallsBackAndSaysWhatItCosts) {
  struct Case {
    bool damaged;
    std::string keep;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {false, "1", "; resuming from flushed epoch 0, 3 epochs lost"},
      {true, "2", "; resuming from node-local epoch 2, 1 epoch lost"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.damaged ? "damaged" : "missing");
    std::filesystem::remove_all(cwd_ / "D");
    std::filesystem::remove_all(cwd_ / "L");
    run_killed_after_epoch_3({"--local-keep", c.keep});
    if (c.damaged) {
      damage_first_byte(copy_of(cwd_.path(), 3, 1));
    } else {
      std::filesystem::remove(copy_of(cwd_.path(), 3, 1));
    }
    auto resumed = run({"--flush-every", "10", "--local-keep", c.keep, "--resume-from-epoch",
                        "latest", "--summary-json", "s.json"});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto all = resumed.out + resumed.err;
    EXPECT_NE(all.find("epoch 3 not recoverable: rank 1: the node-local copy written on"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find(c.damaged ? "checksum mismatch" : "No such file or directory"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find(c.expected), std::string::npos) << all;
    expect_end_as_synchronous();
    const auto history = json_lines(cwd_ / "D" / "runs.jsonl");
    ASSERT_FALSE(history.empty());
    EXPECT_NE(history.back()["resume_note"].get<std::string>().find(c.expected), std::string::npos)
        << history.back();
  }
}

// On 2 ranks the node-local epochs of 3 are not recoverable: the resume falls back to the
// newest flushed epoch and says so.
TEST_F(LocalLevels, ARankChangeFallsBackToTheNewestFlushedEpoch) {
  run_killed_after_epoch_3({});
  auto resumed = run_bounded(small_sgd_regression_run(2, kSmallSgdLastEpoch,
                                                      {"--local-dir", "L", "--resume-from-epoch",
                                                       "latest", "--log-level", "info"}),
                             cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("epoch 3 not recoverable: it was saved node-local by 3 ranks"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("resuming from flushed epoch 0, 3 epochs lost"), std::string::npos) << all;
  EXPECT_NE(all.find("written by 3 ranks, now 2"), std::string::npos) << all;
  // Rank 2's copies and spare, which no rank of this run writes, went with the epochs the run
  // retired, as the other ranks' did.
  EXPECT_EQ(list_directory(cwd_ / "L"),
            (std::vector<std::string>{copy_of(cwd_.path(), 5, 0).filename().string(),
                                      copy_of(cwd_.path(), 5, 1).filename().string()}));
}

// A resume without --local-dir cannot read node-local epoch 3: it says so, with what it costs,
// falls back to flushed epoch 0 and ends bit-identical; asked for epoch 3 explicitly, it fails
// with exit 3 and one line.
TEST_F(LocalLevels, AResumeWithoutTheLocalDirectorySaysWhatItPassesOver) {
  run_killed_after_epoch_3({});
  auto refused =
      run_bounded(small_sgd({"--resume-from-epoch", "3", "--log-level", "info"}), cwd_.path());
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_NE(refused.err.find("this run has none"), std::string::npos) << refused.err;
  auto resumed = run_bounded(small_sgd({"--resume-from-epoch", "latest", "--log-level", "info",
                                        "--summary-json", "s.json"}),
                             cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::string expected =
      "epoch 3 not recoverable: node-local epoch 3 (D/epoch-000003.local.json) is read from the "
      "ranks' --local-dir, and this run has none; resuming from flushed epoch 0, 3 epochs lost";
  EXPECT_NE((resumed.out + resumed.err).find(expected), std::string::npos)
      << resumed.out + resumed.err;
  const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
  EXPECT_EQ(summary["resume_note"], expected);
  expect_end_as_synchronous();
}

// A FIFO under a manifest's name is refused, not read (a read would wait for a writer forever):
// the resume falls back to flushed epoch 0, and inspect lists the directory.
TEST_F(LocalLevels, AManifestThatIsAFifoIsRefusedNotRead) {
  run_killed_after_epoch_3({});
  const auto manifest = cwd_ / "D" / manifest_name(3);
  std::filesystem::remove(manifest);
  ASSERT_EQ(::mkfifo(manifest.c_str(), 0600), 0);
  auto listed = run_bounded({EPOCHRUN_BINARY, "inspect", "D"}, cwd_.path(), {});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE((listed.out + listed.err).find("is not a regular file"), std::string::npos)
      << listed.out << listed.err;
  auto resumed = run({"--flush-every", "10", "--resume-from-epoch", "latest"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("is not a regular file; resuming from flushed epoch 0, 3 epochs lost"),
            std::string::npos)
      << all;
  expect_end_as_synchronous();
}

// A preemption signal after epoch 3 with --flush-every 10: the stop's checkpoint is flushed.
// The resume after it reads the flushed epoch 3 from the node-local copies, and records that
// level.
TEST_F(LocalLevels, AStopFlushesItsCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(stop_in_epoch_3({}));
  auto resumed =
      run({"--flush-every", "10", "--resume-from-epoch", "latest", "--summary-json", "s.json"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("from epoch 3 (the node-local copies in L"), std::string::npos) << all;
  expect_end_as_synchronous();
  const auto summary = nlohmann::json::parse(read_file(cwd_ / "s.json"));
  EXPECT_EQ(summary["resumed_from"], 3);
  EXPECT_EQ(summary["resumed_from_level"], "node-local");
}

// With --async-checkpoint a node-local epoch's redundancy exchange runs in the background: every
// rank's exchange of epoch 2 is held (save-redundancy@2:WAIT, never released) and rank 0 still
// reaches the end of epoch 3 (epoch@3:0:STOP), where epoch 2 is committed by its manifest as
// unprotected ("none"), not yet as partner. Killed there, the resume loads node-local epoch 2,
// still unprotected, and ends bit-identical. An uninterrupted run's manifests all say partner
// once their exchanges settled. (On the job's thread, the exchange held the job in epoch 2's
// save: rank 0 never reached epoch 3 while it was held.)
TEST_F(LocalLevels, AnAsynchronousRunExchangesRedundancyInTheBackground) {
  const std::vector<std::string> options = {"--flush-every", "10", "--async-checkpoint",
                                            "--local-redundancy", "partner"};
  const auto redundancy_of = [&](std::int64_t epoch) {
    return nlohmann::json::parse(read_file(cwd_ / "D" / manifest_name(epoch)))["redundancy"]
        .get<std::string>();
  };
  {
    auto environment = with_fault("save-redundancy@2:WAIT,epoch@3:0:STOP");
    environment["EPOCHRUN_FAULT_RELEASE"] = (cwd_ / "release").string();
    auto args = options;
    args.insert(args.begin(), {"--local-dir", "L", "--log-level", "info"});
    ChildProcess job(small_sgd(args), cwd_.path(), environment);
    const auto paused = wait_for_a_stopped_child(job);
    ASSERT_TRUE(paused.has_value()) << "rank 0 never reached epoch 3 while epoch 2's exchange "
                                       "was held";
    ASSERT_FALSE(std::filesystem::exists(cwd_ / "release"));
    EXPECT_EQ(redundancy_of(2), "none");
    for (const int rank : job.children()) {
      ::kill(rank, SIGKILL);
    }
    ASSERT_TRUE(job.wait(kSmallSgdRunSeconds).has_value()) << "the killed job did not end";
  }
  EXPECT_EQ(redundancy_of(2), "none");
  auto listed = run_bounded({EPOCHRUN_BINARY, "inspect", "D", "--json"}, cwd_.path(), {});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto listing = nlohmann::json::parse(listed.out);
  ASSERT_FALSE(listing["node_local_epochs"].empty()) << listing;
  EXPECT_EQ(listing["node_local_epochs"].back()["epoch"], 2) << listing;
  EXPECT_EQ(listing["node_local_epochs"].back()["redundancy"], "none") << listing;

  auto resume_args = options;
  resume_args.insert(resume_args.end(), {"--resume-from-epoch", "latest"});
  auto resumed = run(resume_args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("from node-local epoch 2"), std::string::npos)
      << resumed.out + resumed.err;
  expect_end_as_synchronous();

  std::filesystem::remove_all(cwd_ / "D");
  std::filesystem::remove_all(cwd_ / "L");
  auto whole = options;
  whole.insert(whole.end(), {"--local-keep", "10"});
  whole.insert(whole.end(), {"--summary-json", "s.json"});
  auto uninterrupted = run(whole);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  EXPECT_EQ(files_in("D", ".local.json"),
            (std::vector<std::string>{manifest_name(1), manifest_name(2), manifest_name(3),
                                      manifest_name(4)}));
  for (const std::int64_t epoch : {1, 2, 3, 4}) {
    EXPECT_EQ(redundancy_of(epoch), "partner") << epoch;
  }
  expect_end_as_synchronous();
  // Each exchange ran beside the job, in no save's phases: its time is a metrics line of its
  // own, every rank's, once. Epoch 0's too: flushed in the background, it was committed (and
  // protected) node-local while its flush ran.
  std::map<std::int64_t, int> exchanged;
  for (const auto& line : json_lines(cwd_ / "D" / "metrics.jsonl")) {
    if (line["event"] == "redundancy") {
      EXPECT_EQ(line["level"], "node-local") << line;
      for (const auto& rank : line["ranks"]) {
        EXPECT_GT(rank.value("redundancy_seconds", 0.0), 0.0) << line;
      }
      exchanged[line["epoch"].get<std::int64_t>()] += static_cast<int>(line["ranks"].size());
    }
  }
  EXPECT_EQ(exchanged, (std::map<std::int64_t, int>{{0, 3}, {1, 3}, {2, 3}, {3, 3}, {4, 3}}));
  const auto node_local =
      nlohmann::json::parse(read_file(cwd_ / "s.json"))["save_levels"]["node-local"];
  EXPECT_EQ(node_local["saves"], 4) << node_local;
  EXPECT_GT(node_local["background_redundancy_seconds"].get<double>(), 0.0) << node_local;
  EXPECT_EQ(node_local["redundancy_seconds"], node_local["background_redundancy_seconds"])
      << node_local;
}

// A preemption signal while epoch 2's exchange may still run in the background: the stop waits
// for it before its own flush, so epochs 1 and 2 end committed as protected (their manifests say
// partner, none half-written), and the stop's checkpoint, epoch 3, is flushed.
TEST_F(LocalLevels, AStopSettlesTheExchangeInFlight) {
  ASSERT_NO_FATAL_FAILURE(stop_in_epoch_3(
      {"--local-keep", "10", "--async-checkpoint", "--local-redundancy", "partner"}));
  EXPECT_EQ(files_in("D", ".local.json"),
            (std::vector<std::string>{manifest_name(1), manifest_name(2)}));
  for (const std::int64_t epoch : {1, 2}) {
    EXPECT_EQ(nlohmann::json::parse(read_file(cwd_ / "D" / manifest_name(epoch)))["redundancy"],
              "partner")
        << epoch;
  }
}

// A --local-dir that does not exist is created (with its parents).
TEST_F(LocalLevels, AMissingLocalDirectoryIsCreated) {
  auto result =
      run_bounded(small_sgd({"--local-dir", "new/local", "--flush-every", "2"}), cwd_.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::is_directory(cwd_ / "new" / "local"));
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 2, 4, 5}));
}

// Bad values: one line on stderr, exit code 2, nothing saved.
TEST_F(LocalLevels, BadValuesAreRefusedWithOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--local-dir", "L", "--flush-every", "0"}, "--flush-every must be"},
      {{"--local-dir", "L", "--flush-every", "-2"}, "--flush-every must be"},
      {{"--local-dir", "L", "--flush-interval", "0"}, "--flush-interval must be"},
      {{"--local-dir", "L", "--local-keep", "0"}, "--local-keep must be"},
      {{"--flush-every", "5"}, "--flush-every needs --local-dir"},
      {{"--local-keep", "2"}, "--local-keep needs --local-dir"},
  };
  for (const auto& [args, why] : cases) {
    SCOPED_TRACE(why);
    auto result = run_bounded(small_sgd(args), cwd_.path());
    EXPECT_EQ(result.exit_code, 2) << result.err;
    const auto lines = error_lines(result);
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_NE(lines[0].find(why), std::string::npos) << lines[0];
    EXPECT_FALSE(std::filesystem::exists(cwd_ / "D" / "epoch-000000.h5"));
  }
}

// A full node-local file system (a 64 KiB tmpfs, filled): the first copy fails, one line says
// that every checkpoint is flushed from now on, the job goes on and every epoch is committed as
// the synchronous run's. Needs root to mount; skipped otherwise.
TEST_F(LocalLevels, AFullNodeLocalFileSystemDegradesToFlushingEveryCheckpoint) {
  std::filesystem::create_directory(cwd_ / "L");
  if (::mount("tmpfs", (cwd_ / "L").c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  }
  {
    std::ofstream filler(cwd_ / "L" / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && filler.write(block.data(), block.size()); ++i) {
    }
  }
  auto result = run({"--flush-every", "3"});
  ::umount2((cwd_ / "L").c_str(), MNT_DETACH);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  expect_end_as_synchronous();
  const auto all = result.out + result.err;
  const std::string line = "every checkpoint is flushed to the checkpoint directory from now on";
  ASSERT_NE(all.find(line), std::string::npos) << all;
  EXPECT_EQ(all.find(line, all.find(line) + 1), std::string::npos) << "said twice: " << all;
  EXPECT_NE(all.find("No space left on device"), std::string::npos) << all;
}

// The node-local file system fills in the middle of a run (rank 1 paused in epoch 3, the spares
// deleted, a file grown until the tmpfs is full): epoch 3's copy fails, epoch 3 is flushed, and
// what the level kept of epoch 2 (its copies and manifest), older than the flushed epoch, goes
// then instead of holding the full file system for good. Needs root to mount.
TEST_F(LocalLevels, ANodeLocalFileSystemFullInTheMiddleOfARunIsLeftWithNothingOfTheLevel) {
  std::filesystem::create_directory(cwd_ / "L");
  if (::mount("tmpfs", (cwd_ / "L").c_str(), "tmpfs", 0, "size=8m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  }
  struct Unmount {
    std::filesystem::path at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{cwd_ / "L"};
  ChildProcess job(small_sgd({"--local-dir", "L", "--flush-every", "10", "--log-level", "info"}),
                   cwd_.path(), with_fault("epoch-task@3:1:STOP"));
  const auto paused = wait_for_a_stopped_child(job);
  ASSERT_TRUE(paused.has_value()) << "no rank paused";
  // Rank 1's is enough to fail the copy on every rank (the others may still be retaining).
  for (int rank = 0; rank < 3; ++rank) {
    std::filesystem::remove(cwd_ / "L" / ("spare.rank-" + std::to_string(rank) + ".local"));
  }
  {
    std::ofstream filler(cwd_ / "L" / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }
  ::kill(*paused, SIGCONT);
  const auto result = job.wait(kSmallSgdRunSeconds);
  ASSERT_TRUE(result.has_value()) << "the job did not end";
  ASSERT_EQ(result->exit_code, 0) << result->err;
  const auto all = result->out + result->err;
  EXPECT_NE(all.find("every checkpoint is flushed to the checkpoint directory from now on"),
            std::string::npos)
      << all;
  EXPECT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
            (std::vector<std::int64_t>{0, 3, 4, 5}));
  expect_end_as_synchronous();
  EXPECT_TRUE(files_in("D", ".local.json").empty());
  EXPECT_EQ(list_directory(cwd_ / "L"), (std::vector<std::string>{"filler"}));
  EXPECT_EQ(all.find("could not be deleted"), std::string::npos) << all;
}

// The same runs on three hosts (three_hosts.hpp): the checkpoint directory D shared, each host's
// --local-dir L its own (h1/L, h2/L, h3/L), so that --local-redundancy protects each host's
// copies on the others and a host can be lost by wiping its directory.
class LocalLevelsOnThreeHosts : public LocalLevels {
 protected:
  void SetUp() override {
    if (!can_name_hosts()) {
      GTEST_SKIP() << "cannot give a process a host name of its own (unshare --uts needs root)";
    }
  }

  // small_sgd's job on the three hosts, logging at info, `extra` after its options.
  std::vector<std::string> on_hosts(const std::vector<std::string>& extra) const {
    auto args = small_sgd_regression_options(kSmallSgdLastEpoch);
    const auto level = std::find(args.begin(), args.end(), "--log-level");
    args.erase(level, level + 2);
    args.insert(args.begin(), {"run", "--checkpoint-dir", (cwd_ / "D").string(), "--local-dir", "L",
                               "--log-level", "info"});
    args.insert(args.end(), extra.begin(), extra.end());
    return epochrun_on_three_hosts(cwd_.path(), args);
  }

  // The run ended as the synchronous one: last epoch, and the model rank 0 exported (h1's).
  void expect_ends_as_synchronous() const {
    EXPECT_EQ(epoch_of(cwd_.path(), kSmallSgdLastEpoch),
              epoch_of(sync_->path(), kSmallSgdLastEpoch));
    EXPECT_EQ(read_blob_file(host_dir(cwd_.path(), 0) / "model.h5"),
              read_blob_file(sync_->path() / "model.h5"));
  }

  // The run of ALostHostCostsOnlyTheEpochWhoseExchangeHadNotFinished (below) with
  // --local-redundancy `redundancy`, and its resume.
  void lose_a_host_during_the_exchange_of_epoch_2(const std::string& redundancy, bool async) {
    for (const auto* leftover : {"D", "h1", "h2", "h3"}) {
      std::filesystem::remove_all(cwd_ / leftover);
    }
    std::vector<std::string> options = {"--flush-every", "10", "--local-redundancy", redundancy};
    if (async) {
      options.push_back("--async-checkpoint");
    }
    {
      auto environment =
          with_fault(async ? "save-redundancy@2:WAIT,epoch@3:0:STOP" : "save-redundancy@2:0:STOP");
      environment["EPOCHRUN_FAULT_RELEASE"] = (cwd_ / "never-released").string();
      ChildProcess job(on_hosts(options), cwd_.path(), environment);
      const auto paused = wait_for_a_stopped_child(job);
      ASSERT_TRUE(paused.has_value()) << "rank 0 never paused";
      for (const int rank : job.children()) {
        ::kill(rank, SIGKILL);
      }
      ASSERT_TRUE(job.wait(kSmallSgdRunSeconds).has_value()) << "the killed job did not end";
    }
    ASSERT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(), (std::vector<std::int64_t>{0}));
    ASSERT_TRUE(std::filesystem::exists(manifest(1))) << "epoch 1 was not kept";
    EXPECT_NE(redundancy_of(1), "none");
    if (async) {
      EXPECT_EQ(redundancy_of(2), "none");
    } else {
      EXPECT_FALSE(std::filesystem::exists(manifest(2)));
    }
    std::filesystem::remove_all(host_dir(cwd_.path(), 1) / "L");

    options.insert(options.end(), {"--resume-from-epoch", "latest"});
    auto resumed = run_bounded(on_hosts(options), cwd_.path());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const auto all = resumed.out + resumed.err;
    EXPECT_NE(all.find("resumed job sgd_regression from node-local epoch 1"), std::string::npos)
        << all;
    EXPECT_NE(all.find("rt-h2: 1 part "), std::string::npos) << all;
    if (async) {
      EXPECT_NE(all.find("epoch 2 not recoverable"), std::string::npos) << all;
      EXPECT_NE(all.find("resuming from node-local epoch 1, 1 epoch lost"), std::string::npos)
          << all;
    }
    expect_ends_as_synchronous();
  }

  // The run of ACopyThatVanishesBeforeItsManifestFailsTheSaveOnEveryRank (below) whose rank
  // `rank` loses its copy.
  void lose_the_copy_of_epoch_2_before_its_manifest(int rank) {
    for (const auto* leftover : {"D", "h1", "h2", "h3"}) {
      std::filesystem::remove_all(cwd_ / leftover);
    }
    const auto copy = "L/epoch-000002.rank-" + std::to_string(rank) + ".local";
    ChildProcess job(
        on_hosts({"--flush-every", "10", "--local-redundancy", "partner", "--save-timeout", "20"}),
        cwd_.path(), with_fault("save-redundancy@2:" + std::to_string(rank) + ":STOP"));
    const auto paused = wait_for_a_stopped_child(job);
    ASSERT_TRUE(paused.has_value()) << "rank " << rank << " never paused";
    ASSERT_TRUE(std::filesystem::remove(host_dir(cwd_.path(), rank) / copy));
    ::kill(*paused, SIGCONT);
    const auto result = job.wait(kSmallSgdRunSeconds);
    ASSERT_TRUE(result.has_value()) << "the job did not end";
    EXPECT_EQ(result->exit_code, 0) << result->err;
    const auto all = result->out + result->err;
    EXPECT_NE(all.find("checkpoint for epoch 2 failed, the job goes on: save epoch 2: node-local "
                       "manifest: " +
                       std::string(rank == 0 ? "" : "rank 1: ") + "the node-local copy " + copy +
                       " on " + host_of_rank(rank) + ": No such file or directory"),
              std::string::npos)
        << all;
    EXPECT_EQ(all.find("did not arrive within"), std::string::npos) << all;
    ASSERT_EQ(CheckpointDirectory(cwd_ / "D").committed_epochs(),
              (std::vector<std::int64_t>{0, 5}));
    expect_ends_as_synchronous();
  }

  std::filesystem::path manifest(std::int64_t epoch) const {
    return cwd_ / "D" / manifest_name(epoch);
  }
  std::string redundancy_of(std::int64_t epoch) const {
    return nlohmann::json::parse(read_file(manifest(epoch)))["redundancy"].get<std::string>();
  }
};

// A host lost while epoch 2's redundancy exchange has not finished (--flush-every 10, the default
// --local-keep 1): the resume recovers node-local epoch 1, which its manifest says is protected,
// from the other hosts' files, losing only epoch 2 (with --async-checkpoint epoch 2 is committed
// unprotected meanwhile, and is itself lost with the host). Each run is killed (every rank,
// SIGKILL) while epoch 2's exchange is held: on the job's thread (save-redundancy@2:0:STOP)
// synchronously; in the background (save-redundancy@2:WAIT, never released) once rank 0 ran epoch
// 3 (epoch@3:0:STOP), asynchronously. Then host 2's node-local directory is wiped. Before,
// retention deleted epoch 1 (its manifest, copies and redundancy files) as soon as epoch 2 was
// committed unprotected, and the asynchronous resumes fell back to flushed epoch 0.
TEST_F(LocalLevelsOnThreeHosts, ALostHostCostsOnlyTheEpochWhoseExchangeHadNotFinished) {
  for (const auto* redundancy : {"partner", "xor"}) {
    for (const bool async : {false, true}) {
      SCOPED_TRACE(std::string(redundancy) + (async ? ", --async-checkpoint" : ", synchronous"));
      lose_a_host_during_the_exchange_of_epoch_2(redundancy, async);
    }
  }
}

// Blocks of 512 bytes `directory`'s files take on their file systems, all of them.
std::uintmax_t blocks_under(const std::filesystem::path& directory) {
  std::uintmax_t blocks = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(directory)) {
    struct stat status {};
    if (::lstat(entry.path().c_str(), &status) == 0) {
      blocks += static_cast<std::uintmax_t>(status.st_blocks);
    }
  }
  return blocks;
}

// `file` made 8 TiB long as `truncate -s 8T` makes it (its bytes, then zeros that take no
// space), created when missing.
void forge_at_8_tebibytes(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) {
    write_file(file, "");
  }
  ASSERT_EQ(::truncate(file.c_str(), off_t{8} << 40), 0) << file;
}

// Every metadata file the program reads, forged at 8 TiB (sparse: the test's files take a few
// MiB), is judged by its size as damaged, never read whole: a node-local epoch's manifest, the run
// history (runs.jsonl), metrics.jsonl, index.json (which no reader of the program reads) and a
// partner copy's redundancy file; a checkpoint file too (its integrity header and layout record
// are read within its user block). No error of a class outside the error table, no
// std::bad_alloc, reaches the user: inspect lists the damaged manifest and run history and exits
// 0, and exits 3 naming the checkpoint with --verify; a resume from the damaged manifest's epoch
// exits 3 with one line; report exits 2 with one line; `latest` passes over the damaged manifest,
// and over epoch 3, whose lost host's part only the damaged partner copy held, and resumes from
// node-local epoch 2. Before: the resume ended with `node-local epoch 99:
// std::bad_alloc` (exit 1), inspect listed it as "DAMAGED: std::bad_alloc", the run history was
// "not read: std::bad_alloc" and report ended with "cannot read ...: std::bad_alloc".
TEST_F(LocalLevelsOnThreeHosts, MetadataFilesThatReadAsHugeAreJudgedDamagedNotRead) {
  std::vector<std::string> options = {"--flush-every", "10", "--local-keep", "2"};
  options.insert(options.end(), {"--local-redundancy", "partner"});
  {
    auto result = run_bounded(on_hosts(options), cwd_.path(), with_fault("epoch@4:1:KILL"));
    ASSERT_NE(result.exit_code, 0) << result.err;
    ASSERT_EQ(files_in("D", ".local.json"),
              (std::vector<std::string>{manifest_name(2), manifest_name(3)}));
  }
  const auto huge = [](const std::string& all) {
    return all.find("holds 8.0 TiB, more than the") != std::string::npos &&
           all.find("it is damaged") != std::string::npos;
  };
  const auto no_stray_exception = [](const std::string& all) {
    return all.find("bad_alloc") == std::string::npos &&
           all.find("length_error") == std::string::npos &&
           all.find("filesystem error") == std::string::npos;
  };
  forge_at_8_tebibytes(manifest(99));
  forge_at_8_tebibytes(cwd_ / "D" / "runs.jsonl");
  forge_at_8_tebibytes(cwd_ / "D" / "metrics.jsonl");
  forge_at_8_tebibytes(cwd_ / "D" / "index.json");
  // Rank 1's part of epoch 3 held only by its partner copy (on host 3, the next host), damaged.
  std::filesystem::remove(host_dir(cwd_.path(), 1) / "L" / "epoch-000003.rank-1.local");
  forge_at_8_tebibytes(host_dir(cwd_.path(), 2) / "L" / "epoch-000003.rank-1.partner");
  EXPECT_LT(blocks_under(cwd_.path()), 64u << 11) << "the forged files take space";

  auto listed = run_bounded({EPOCHRUN_BINARY, "inspect", (cwd_ / "D").string()}, cwd_.path(), {});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  const auto listing = listed.out + listed.err;
  EXPECT_NE(listing.find("epoch 99  epoch-000099.local.json  DAMAGED: "), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("run history not read: " + (cwd_ / "D" / "runs.jsonl").string() +
                         " holds 8.0 TiB"),
            std::string::npos)
      << listing;
  EXPECT_TRUE(huge(listing)) << listing;
  EXPECT_TRUE(no_stray_exception(listing)) << listing;

  // A checkpoint file at 8 TiB: its integrity header and layout record are read within its user
  // block, and the file is damaged (not the size it was committed at).
  forge_at_8_tebibytes(cwd_ / "D" / "epoch-000000.h5");
  auto verified =
      run_bounded({EPOCHRUN_BINARY, "inspect", (cwd_ / "D").string(), "--verify"}, cwd_.path(), {});
  EXPECT_EQ(verified.exit_code, 3) << verified.err;
  const auto verification = verified.out + verified.err;
  EXPECT_NE(verification.find("the file has 8796093022208 bytes"), std::string::npos)
      << verification;
  EXPECT_TRUE(no_stray_exception(verification)) << verification;

  auto reported = run_bounded(
      {EPOCHRUN_BINARY, "report", (cwd_ / "D").string(), "-o", (cwd_ / "timeline.svg").string()},
      cwd_.path(), {});
  EXPECT_EQ(reported.exit_code, 2) << reported.err;
  const auto report_lines = error_lines(reported);
  ASSERT_EQ(report_lines.size(), 1u) << reported.err;
  EXPECT_TRUE(huge(report_lines[0])) << report_lines[0];
  EXPECT_NE(report_lines[0].find("metrics.jsonl"), std::string::npos) << report_lines[0];

  auto explicit_epoch = options;
  explicit_epoch.insert(explicit_epoch.end(), {"--resume-from-epoch", "99"});
  auto refused = run_bounded(on_hosts(explicit_epoch), cwd_.path());
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  const auto refused_lines = error_lines(refused);
  ASSERT_EQ(refused_lines.size(), 1u) << refused.err;
  EXPECT_TRUE(huge(refused_lines[0])) << refused_lines[0];
  EXPECT_NE(refused_lines[0].find(manifest_name(99)), std::string::npos) << refused_lines[0];

  auto latest = options;
  latest.insert(latest.end(), {"--resume-from-epoch", "latest"});
  auto resumed = run_bounded(on_hosts(latest), cwd_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto all = resumed.out + resumed.err;
  EXPECT_NE(all.find("epoch 99 not recoverable: "), std::string::npos) << all;
  EXPECT_TRUE(huge(all)) << all;
  EXPECT_NE(all.find("node-local epoch 3 not recoverable either"), std::string::npos) << all;
  EXPECT_NE(all.find("resumed job sgd_regression from node-local epoch 2"), std::string::npos)
      << all;
  EXPECT_TRUE(no_stray_exception(all)) << all;
  expect_ends_as_synchronous();
  EXPECT_LT(blocks_under(cwd_.path()), 64u << 11);
}

// A node-local copy that vanishes after the ranks agreed on it (another run sharing --local-dir
// deletes it: here the test, while its rank is paused at epoch 2's exchange, save-redundancy@2:R:
// STOP), rank 0's and then rank 1's: that save fails on every rank with one warning line naming
// the rank, its host and the copy, and the job goes on to the end as the synchronous run. Before,
// the rank alone failed to read its copy's size and went on to its next epoch, out of step with
// the others' collective calls: with rank 0, the others waited for its manifest until
// --save-timeout ran out (exit 1); with rank 1, silently (only rank 0 reports a failed save),
// every rank waited for good in the next stop decision's gather and broadcast.
TEST_F(LocalLevelsOnThreeHosts, ACopyThatVanishesBeforeItsManifestFailsTheSaveOnEveryRank) {
  for (const int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    lose_the_copy_of_epoch_2_before_its_manifest(rank);
  }
}

// Two runs sharing each host's --local-dir (against the advice of docs/CLUSTERS.md: they delete
// and replace each other's copies, spares and redundancy files), the second with another seed and
// checkpoint directory; the first killed (every rank, SIGKILL) after its node-local epoch 5
// (unless it ended before, its level switched off by what the second took of its files). The
// second must end however it meets the first's files, without waiting out --save-timeout: exit 0,
// its last epoch committed. Eight trials (a couple of seconds each). Before, two of eight trials
// ended only when --save-timeout ran out and one never (a rank whose copy was gone failed alone:
// the test above).
TEST_F(LocalLevelsOnThreeHosts, ARunSharingItsLocalDirectoryWithAKilledOneEndsWithinItsBound) {
  constexpr int kTrials = 8;
  const auto heat = [&](const std::string& seed, const std::string& directory) {
    std::vector<std::string> args;
    std::istringstream options(
        "run --job heat_diffusion --local-dir L --flush-every 3 --local-keep 1 "
        "--local-redundancy partner --save-timeout 20 --log-level warn --heat_diffusion.rows 256 "
        "--heat_diffusion.columns 512 --heat_diffusion.max_epochs 12 --heat_diffusion.tolerance 0");
    for (std::string option; options >> option;) {
      args.push_back(option);
    }
    args.insert(args.end(),
                {"--checkpoint-dir", (cwd_ / directory).string(), "--heat_diffusion.seed", seed,
                 "--heat_diffusion.output_file", "heat-" + seed + ".json"});
    return epochrun_on_three_hosts(cwd_.path(), args);
  };
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    for (const auto* leftover : {"A", "B", "h1", "h2", "h3"}) {
      std::filesystem::remove_all(cwd_ / leftover);
    }
    ChildProcess first(heat("1", "A"), cwd_.path(), kMpiEnvironment);
    ChildProcess second(heat("2", "B"), cwd_.path(), kMpiEnvironment);
    // Until its node-local epoch 5 is committed, or it ended first (its level switched off
    // when the second run took its files: then every checkpoint is flushed).
    std::optional<ProcessResult> ended;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!std::filesystem::exists(cwd_ / "A" / manifest_name(5)) &&
           !(ended = first.wait(0.005)) && std::chrono::steady_clock::now() < deadline) {
    }
    if (!ended) {
      for (const int rank : first.children()) {
        ::kill(rank, SIGKILL);
      }
      ASSERT_TRUE(first.wait(kSmallSgdRunSeconds).has_value()) << "the killed run did not end";
    }
    const auto result = second.wait(kSmallSgdRunSeconds);
    ASSERT_TRUE(result.has_value()) << "the second run did not end";
    EXPECT_EQ(result->exit_code, 0) << result->err;
    EXPECT_EQ(result->err.find("did not arrive within"), std::string::npos) << result->err;
    EXPECT_TRUE(std::filesystem::exists(cwd_ / "B" / "epoch-000012.h5")) << result->err;
  }
}

}  // namespace
}  // namespace epochrun::testing
