#include "bench/bench_measures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>

#include "background_index.hpp"
#include "bench/bench_rounds.hpp"
#include "bench/median.hpp"
#include "bench/peak_memory.hpp"
#include "checkpoint_directory_admin.hpp"
#include "checkpoint_index.hpp"
#include "collective_errors.hpp"
#include "command_line.hpp"
#include "epochrun/job.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

CheckpointHeader bench_header(const Communicator& comm) {
  CheckpointHeader header;
  header.job = "bench";
  for (int rank = 0; rank < comm.size(); ++rank) {
    header.node_names.push_back(Job::node_name(rank));
  }
  return header;
}

// One save and one load, each between a reset of the peak resident memory and its reading;
// the largest figures of any rank.
nlohmann::json measure_memory(const Communicator& comm, const CheckpointDirectory& checkpoints,
                              CheckpointHeader header, const Workspace& workspace,
                              std::int64_t epoch) {
  header.epoch = epoch;
  auto row = [&](const char* name, const char* what, const PeakMemory& memory) {
    return nlohmann::json{{"name", name},
                          {"what", what},
                          {"state_bytes", comm.allreduce_max(double(workspace.byte_size()))},
                          {"rss_before_bytes", comm.allreduce_max(double(memory.before_bytes))},
                          {"peak_rss_bytes", comm.allreduce_max(double(memory.peak_bytes))},
                          {"peak_added_bytes", comm.allreduce_max(double(memory.added_bytes()))}};
  };
  PeakMemory saved;
  run_then_agree(comm, "save (memory)", [&] {
    saved = measure_peak_memory(
        [&] { save_checkpoint(checkpoints, comm, header, workspace, workspace.names()); });
  });
  auto rows = nlohmann::json::array();
  rows.push_back(row("save_memory", "peak resident memory of one save, per rank", saved));
  PeakMemory loaded;
  {
    Workspace into;
    run_then_agree(comm, "load (memory)", [&] {
      loaded = measure_peak_memory([&] {
        load_checkpoint(checkpoints, comm,
                        CheckpointExpectation{epoch, header.job, header.node_names}, into);
      });
    });
  }
  rows.push_back(row("load_memory", "peak resident memory of one load, per rank", loaded));
  run_on_root_then_agree(comm, "remove", [&] { remove_checkpoints(checkpoints, {epoch}); });
  return rows;
}

// What measure_disk times: the library's save and load, and the plain I/O of the same bytes.
struct DiskSeries {
  Series save{"save", "CheckpointDirectory::save: one shared HDF5 file, committed", {}};
  Series write{"write_limit", "pwrite + fsync of the same bytes, one file per rank", {}};
  Series hinted{"write_limit_hinted",
                "the same with writeback started after every 8 MiB (sync_file_range), one file "
                "per rank",
                {}};
  Series load{"load", "CheckpointDirectory::load, every checksum verified", {}};
  Series read{"read_limit", "pread of the same bytes into freshly allocated buffers", {}};
};

// One round of measure_disk, epoch header.epoch: a save and a plain write, then a load and a
// plain read, each pair in the order alternate() gives the round; then the round's files go.
void measure_disk_round(const Communicator& comm, const fs::path& directory,
                        const CheckpointDirectory& checkpoints, const CheckpointHeader& header,
                        const Workspace& workspace, MeasureSettings& settings, DiskSeries& series) {
  const auto round = header.epoch;
  const auto names = workspace.names();
  const auto plain_file = [&](const char* kind) {
    return directory / "plain" /
           ("round-" + std::to_string(round) + "-rank-" + std::to_string(comm.rank()) + kind);
  };
  const auto plain = plain_file(".bin");
  const auto hinted = plain_file("-hinted.bin");
  bool same = false;
  in_turn(round, {[&] {
                    series.save.seconds.push_back(timed(comm, "save", [&] {
                      save_checkpoint(checkpoints, comm, header, workspace, names);
                    }));
                  },
                  [&] {
                    series.write.seconds.push_back(
                        timed(comm, "write_limit", [&] { write_limit(plain, workspace); }));
                  },
                  [&] {
                    series.hinted.seconds.push_back(timed(comm, "write_limit_hinted", [&] {
                      write_limit(hinted, workspace, Writeback::kHinted);
                    }));
                  }});
  // Both reads from the disk: the save wrote its large blobs with direct I/O, the limit's write
  // went through the page cache (which made the limit read from memory, the load from the disk).
  const std::vector<fs::path> read_files = {plain, checkpoints.file_for(round)};
  alternate(
      round,
      [&] {
        before_read(comm, settings);
        drop_files_from_cache(comm, read_files);
        Workspace loaded;
        series.load.seconds.push_back(timed(comm, "load", [&] {
          load_checkpoint(checkpoints, comm,
                          CheckpointExpectation{round, header.job, header.node_names}, loaded);
        }));
        same = loaded.blobs() == workspace.blobs();
      },
      [&] {
        before_read(comm, settings);
        drop_files_from_cache(comm, read_files);
        std::vector<std::unique_ptr<std::byte[]>> buffers;
        series.read.seconds.push_back(
            timed(comm, "read_limit", [&] { buffers = read_limit(plain, workspace); }));
      });
  // What was measured must be what was saved, or the figures mean nothing.
  run_then_agree(comm, "round " + std::to_string(round), [&] {
    if (!same) {
      throw Error("the loaded checkpoint differs from what was saved");
    }
    // Each round's files go before the next, so that no round measures a fuller directory.
    fs::remove(plain);
    fs::remove(hinted);
  });
  run_on_root_then_agree(comm, "round " + std::to_string(round),
                         [&] { remove_checkpoints(checkpoints, {round}); });
}

// A directory of committed tiny checkpoints of `epochs` epochs, rank 0's index of it and the
// thread that writes its index.json.
struct History {
  CheckpointDirectory directory;
  std::int64_t epochs;
  std::optional<CheckpointIndex> index;         // rank 0
  std::optional<BackgroundIndex> index_writer;  // rank 0
};

// What the runner does per commit (PostCommitSteps::after_commit, keeping every checkpoint):
// the save, then rank 0's index of the directory (seeded by one listing, as a run's) updated
// and the thread that writes index.json told.
void commit_tiny(const Communicator& comm, CheckpointHeader& header, const Workspace& workspace,
                 History& into, std::int64_t epoch) {
  header.epoch = epoch;
  const auto stats = save_checkpoint(into.directory, comm, header, workspace, {"step"});
  run_on_root_then_agree(comm, "index", [&] {
    into.index->add(epoch, stats.file_bytes);
    into.index_writer->changed();
  });
}

// Rank 0 waits until index.json holds the last commit.
void wait_for_the_index(const Communicator& comm, History& of) {
  run_on_root_then_agree(comm, "index", [&] { of.index_writer->flush(); });
}

// Back to the same history for the next round (untimed): the `commits` epochs after it go.
void remove_added(History& from, std::int64_t commits) {
  std::vector<std::int64_t> added(static_cast<std::size_t>(commits));
  std::iota(added.begin(), added.end(), from.epochs);
  std::optional<std::string> failure;
  for (const auto& renamed : from.index->retire(added, failure).renamed) {
    std::filesystem::remove(renamed.second);
  }
  if (failure) {
    throw Error(*failure);
  }
}

}  // namespace

bool last_round(const MeasureSettings& settings, std::int64_t round,
                const std::vector<std::vector<double>>& ratios) {
  if (round + 1 < settings.rounds) {
    return false;
  }
  return round + 1 >= settings.max_rounds ||
         std::all_of(ratios.begin(), ratios.end(),
                     [](const auto& each) { return median_is_stable(each); });
}

nlohmann::json with_target(nlohmann::json row, double target) {
  row["target"] = target;
  // A ratio is only as good as its limit: one whose rounds spread more than twice met two media
  // (the page cache in some rounds, the disk in others), and a load much faster than the read
  // of the same bytes read from another medium than it. Either is flagged, never met.
  auto flags = nlohmann::json::array();
  const double limit_min = row.value("limit_min_seconds", 0.0);
  const double limit_max = row.value("limit_max_seconds", 0.0);
  if (limit_min > 0 && limit_max > kLimitSpreadFlag * limit_min) {
    flags.push_back("its limit's rounds spread more than " + fmt::format("{:g}", kLimitSpreadFlag) +
                    " times (" + fmt::format("{:.3f}", limit_min) + " to " +
                    fmt::format("{:.3f}", limit_max) +
                    " s): they did not all read or write one medium");
  }
  const auto name = row["name"].get<std::string>();
  if (name.find("load") != std::string::npos && row["ratio"].get<double>() < kLoadRatioFlag) {
    flags.push_back("a load under " + fmt::format("{:g}", kLoadRatioFlag) +
                    " times its limit: the two did not read from one medium");
  }
  row["met"] = row["ratio"].get<double>() <= target && flags.empty();
  if (!flags.empty()) {
    row["flags"] = std::move(flags);
  }
  return row;
}

void before_read(const Communicator& comm, MeasureSettings& settings) {
  if (settings.cold && !drop_page_cache(comm)) {
    settings.cold = false;
    if (comm.is_root()) {
      print_error(
          "--cold: cannot drop the page cache (needs root and a writable "
          "/proc/sys/vm/drop_caches); reads may come from memory");
    }
  }
}

nlohmann::json measure_disk(const Communicator& comm, const fs::path& directory,
                            std::uint64_t bytes_per_rank, std::int64_t blobs,
                            MeasureSettings& settings, bool targets) {
  const auto workspace = random_workspace(bytes_per_rank, blobs, comm.rank());
  auto header = bench_header(comm);
  const CheckpointDirectory checkpoints(directory / "checkpoints");
  DiskSeries series;
  for (std::int64_t round = 0;; ++round) {
    header.epoch = round;
    measure_disk_round(comm, directory, checkpoints, header, workspace, settings, series);
    if (last_round(settings, round,
                   {ratios(series.save, series.write), ratios(series.save, series.hinted),
                    ratios(series.load, series.read)})) {
      break;
    }
  }
  const double bytes = double(bytes_per_rank) * comm.size();
  const auto targeted = [&](nlohmann::json row, double target) {
    return targets ? with_target(std::move(row), target) : row;
  };
  Series save_vs_hinted = series.save;
  save_vs_hinted.name = "save_vs_hinted_write";
  auto rows = nlohmann::json::array();
  rows.push_back(targeted(compare(series.save, series.write, bytes), kSaveTarget));
  rows.push_back(targeted(compare(save_vs_hinted, series.hinted, bytes), kSaveHintedTarget));
  rows.push_back(targeted(compare(series.load, series.read, bytes), kLoadTarget));
  rows.push_back(compare(series.write, series.write, bytes));
  rows.push_back(compare(series.hinted, series.hinted, bytes));
  rows.push_back(compare(series.read, series.read, bytes));
  const auto epoch = static_cast<std::int64_t>(series.save.seconds.size());
  for (auto& row : measure_memory(comm, checkpoints, header, workspace, epoch)) {
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json measure_small_blobs(const Communicator& comm, const fs::path& directory,
                                   std::int64_t count, MeasureSettings& settings) {
  constexpr std::uint64_t kBlobBytes = 1024;
  const auto bytes_per_rank = kBlobBytes * static_cast<std::uint64_t>(count);
  const auto many = random_workspace(bytes_per_rank, count, comm.rank());
  const auto one = random_workspace(bytes_per_rank, 1, comm.rank());  // the same bytes
  auto header = bench_header(comm);
  const CheckpointDirectory many_directory(directory / "small-blobs");
  const CheckpointDirectory one_directory(directory / "one-blob");
  const auto label = std::to_string(count) + " blobs of 1 KiB";
  Series save_many{"save_small_blobs", "CheckpointDirectory::save of " + label, {}};
  Series save_one{"save_one_blob", "the same bytes as one blob", {}};
  Series load_many{"load_small_blobs", "CheckpointDirectory::load of " + label, {}};
  Series load_one{"load_one_blob", "the same bytes as one blob", {}};
  auto save_into = [&](Series& series, const CheckpointDirectory& into,
                       const Workspace& workspace) {
    series.seconds.push_back(timed(comm, series.name, [&] {
      save_checkpoint(into, comm, header, workspace, workspace.names());
    }));
  };
  auto load_from = [&](Series& series, const CheckpointDirectory& from, const Workspace& expected) {
    before_read(comm, settings);
    Workspace loaded;
    series.seconds.push_back(timed(comm, series.name, [&] {
      load_checkpoint(from, comm,
                      CheckpointExpectation{header.epoch, header.job, header.node_names}, loaded);
    }));
    run_then_agree(comm, series.name, [&] {
      if (loaded.blobs() != expected.blobs()) {
        throw Error("the loaded checkpoint differs from what was saved");
      }
    });
  };
  for (std::int64_t round = 0;; ++round) {
    header.epoch = round;
    alternate(
        round, [&] { save_into(save_many, many_directory, many); },
        [&] { save_into(save_one, one_directory, one); });
    alternate(
        round, [&] { load_from(load_many, many_directory, many); },
        [&] { load_from(load_one, one_directory, one); });
    run_on_root_then_agree(comm, "round " + std::to_string(round), [&] {
      remove_checkpoints(many_directory, {round});
      remove_checkpoints(one_directory, {round});
    });
    if (last_round(settings, round, {ratios(save_many, save_one), ratios(load_many, load_one)})) {
      break;
    }
  }
  const double bytes = double(bytes_per_rank) * comm.size();
  return {with_target(compare(save_many, save_one, bytes), kSmallBlobsTarget),
          with_target(compare(load_many, load_one, bytes), kSmallBlobsTarget),
          compare(save_one, save_one, bytes), compare(load_one, load_one, bytes)};
}

nlohmann::json measure_commit_cost(const Communicator& comm, const fs::path& directory,
                                   std::int64_t history, std::int64_t commits,
                                   const MeasureSettings& settings) {
  constexpr std::int64_t kShortHistory = 10;
  Workspace workspace;
  workspace.put("step", Blob::scalar<std::int64_t>(comm.rank()));
  auto header = bench_header(comm);
  History short_history{CheckpointDirectory(directory / "history-short"), kShortHistory, {}, {}};
  History long_history{CheckpointDirectory(directory / "history-long"), history, {}, {}};
  if (comm.is_root()) {
    std::printf("building the histories: %lld and %lld committed tiny checkpoints...\n",
                static_cast<long long>(kShortHistory), static_cast<long long>(history));
    std::fflush(stdout);
  }
  for (auto* into : {&short_history, &long_history}) {
    if (comm.is_root()) {
      into->index.emplace(into->directory, header.job);
      into->index_writer.emplace(*into->index);
    }
    for (std::int64_t epoch = 0; epoch < into->epochs; ++epoch) {
      commit_tiny(comm, header, workspace, *into, epoch);
    }
    wait_for_the_index(comm, *into);
  }
  const auto label = std::to_string(history);
  Series with_long{
      "commit_with_history",
      "a tiny checkpoint committed (save and index) after " + label + " committed epochs",
      {}};
  Series with_short{"commit_with_10", "the same after 10 committed epochs", {}};
  // `commits` new epochs after the history, timed together until index.json holds the last
  // (the run does not wait for it, but its writes share the disk with the saves); the time of
  // one.
  auto commit_into = [&](Series& series, History& into) {
    const double seconds = timed(comm, series.name, [&] {
      for (std::int64_t i = 0; i < commits; ++i) {
        commit_tiny(comm, header, workspace, into, into.epochs + i);
      }
      wait_for_the_index(comm, into);
    });
    series.seconds.push_back(seconds / double(commits));
  };
  for (std::int64_t round = 0;; ++round) {
    alternate(
        round, [&] { commit_into(with_long, long_history); },
        [&] { commit_into(with_short, short_history); });
    run_on_root_then_agree(comm, "round " + std::to_string(round), [&] {
      remove_added(long_history, commits);
      remove_added(short_history, commits);
    });
    if (last_round(settings, round, {ratios(with_long, with_short)})) {
      break;
    }
  }
  auto row = with_target(compare(with_long, with_short, 0), kCommitCostTarget);
  row.erase("mb_per_second");
  row["history"] = history;
  row["commits_per_round"] = commits;
  return {row};
}

}  // namespace epochrun::cli
