#include "bench/job_bench.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <optional>

#include "bench/bench_rounds.hpp"
#include "bench/median.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "run_metrics.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// A synchronous save by the default global-array path (auto) and by the collective MPI-IO one,
// an asynchronous save, no checkpoints.
enum class Mode { kSync, kSyncMpiIo, kAsync, kNone };

// What `epochrun run` would run for `mode`: the same parser, so that a job option the program
// refuses is refused here too, before any round.
Invocation invocation_for(const JobBenchOptions& options, Mode mode) {
  std::vector<std::string> extra;
  if (mode == Mode::kNone) {
    extra.push_back("--no-checkpoints");
  } else {
    extra.insert(extra.end(), {"--checkpoint-dir", "set-per-run"});
  }
  if (mode == Mode::kAsync) {
    extra.push_back("--async-checkpoint");
  }
  if (mode == Mode::kSyncMpiIo) {
    extra.insert(extra.end(), {"--array-io", "mpiio"});
  }
  return job_invocation(options, std::move(extra));
}

// One phase breakdown per save, by rank, read from a run's metrics.jsonl (rank 0).
struct Breakdowns {
  struct OfRank {
    std::vector<std::array<double, kSavePhaseNames.size()>> phases;
    std::vector<double> seconds;
    std::vector<double> minor_faults;
    std::vector<double> major_faults;
  };
  std::vector<OfRank> ranks;
  std::vector<double> slowest_seconds;  // per save, the slowest rank's

  // Each rank's median of every phase, of its save seconds and page faults.
  nlohmann::json medians() const {
    auto out = nlohmann::json::array();
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
      const auto& of = ranks[rank];
      nlohmann::json phases = nlohmann::json::object();
      for (std::size_t i = 0; i < kSavePhaseNames.size(); ++i) {
        std::vector<double> values;
        for (const auto& save : of.phases) {
          values.push_back(save[i]);
        }
        phases[kSavePhaseNames[i]] = median(values);
      }
      out.push_back({{"rank", rank},
                     {"saves", of.seconds.size()},
                     {"save_seconds", median(of.seconds)},
                     {"phases", phases},
                     {"minor_faults", median(of.minor_faults)},
                     {"major_faults", median(of.major_faults)}});
    }
    return out;
  }
};

// Adds the saves of `event` lines ("epoch": synchronous saves, "save": asynchronous ones) in
// `metrics` to `into`.
void read_breakdowns(const fs::path& metrics, const std::string& event, Breakdowns& into) {
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_discarded() || parsed.value("event", "") != event) {
      continue;
    }
    double slowest = 0;
    for (const auto& rank : parsed.at("ranks")) {
      if (!rank.contains("save_phases")) {
        continue;
      }
      const auto r = rank.at("rank").get<std::size_t>();
      into.ranks.resize(std::max(into.ranks.size(), r + 1));
      auto& of = into.ranks[r];
      std::array<double, kSavePhaseNames.size()> phases{};
      for (std::size_t i = 0; i < kSavePhaseNames.size(); ++i) {
        phases[i] = rank.at("save_phases").value(kSavePhaseNames[i], 0.0);
      }
      of.phases.push_back(phases);
      of.seconds.push_back(rank.value("save_seconds", 0.0));
      of.minor_faults.push_back(rank.value("save_minor_faults", 0.0));
      of.major_faults.push_back(rank.value("save_major_faults", 0.0));
      slowest = std::max(slowest, of.seconds.back());
    }
    if (slowest > 0) {
      into.slowest_seconds.push_back(slowest);
    }
  }
}

// What the rounds time, and what the runs' metrics say.
struct JobSeries {
  Series sync_run{"job_sync_run", "the job with a synchronous checkpoint of every epoch", {}};
  Series mpiio_run{"job_sync_run_mpiio", "the same with --array-io mpiio", {}};
  Series async_run{"job_async_run", "the job with --async-checkpoint", {}};
  Series none_run{"job_no_checkpoints_run", "the job with --no-checkpoints", {}};
  Series save{"job_save",
              "a synchronous save's cost in the job: (the run with checkpoints - the run "
              "without) / its saves",
              {}};
  Series save_mpiio{"job_save_mpiio",
                    "the same cost with --array-io mpiio: global arrays by one collective MPI-IO "
                    "write",
                    {}};
  Series save_seconds{"job_save_seconds",
                      "a synchronous save as the job's metrics time it: the slowest rank's, "
                      "median over the run's saves",
                      {}};
  Series write{"job_write_limit",
               "pwrite + fsync of the job's bytes, one file per rank, from memory the job "
               "touched",
               {}};
  Series hinted{"job_write_limit_hinted",
                "the same with writeback started after every 8 MiB (sync_file_range)",
                {}};
  Series direct{"job_write_limit_direct",
                "the same with the file's space reserved and each blob in one O_DIRECT pwrite",
                {}};
  Breakdowns sync_breakdowns;
  Breakdowns mpiio_breakdowns;
  Breakdowns async_breakdowns;
};

// Everything the runs of the rounds share.
struct JobRuns {
  const Communicator& comm;
  const fs::path& directory;
  Invocation sync;
  Invocation mpiio;
  Invocation async;
  Invocation none;
  std::optional<Workspace> touched;  // the last run's workspace: what the limits write
};

// Runs the job as `invocation` says, into `checkpoints` (empty: none); returns its seconds (the
// slowest rank's) and the saves it committed, and keeps its workspace in runs.touched.
double run_job(JobRuns& runs, const Invocation& invocation, const fs::path& checkpoints,
               std::size_t& saves) {
  auto options = invocation.run_options;
  if (!checkpoints.empty()) {
    options.checkpoint_dir = checkpoints;
  }
  Workspace workspace;
  RunSummary summary;
  const double seconds = timed(runs.comm, invocation.general.job, [&] {
    JobRunner runner(invocation.make_job(), runs.comm, options);
    summary = runner.run(workspace);
  });
  if (!summary.failed_saves.empty()) {
    // A run whose saves failed did not pay for them: its figures would mean nothing.
    throw Error("bench --job: the save of epoch " +
                std::to_string(summary.failed_saves.front().epoch) +
                " failed: " + summary.failed_saves.front().error);
  }
  saves = summary.committed.size();
  runs.touched = std::move(workspace);
  return seconds;
}

// A run with checkpoints, its metrics read into `breakdowns` (rank 0) and its directory
// removed (untimed); returns its seconds.
double run_with_checkpoints(JobRuns& runs, const Invocation& invocation, const std::string& label,
                            const std::string& event, Breakdowns& breakdowns, std::size_t& saves) {
  const auto checkpoints = runs.directory / label;
  const double seconds = run_job(runs, invocation, checkpoints, saves);
  run_on_root_then_agree(runs.comm, "read " + label, [&] {
    read_breakdowns(checkpoints / kMetricsFileName, event, breakdowns);
    fs::remove_all(checkpoints);
  });
  return seconds;
}

// One round: the three runs and the two limits in the order in_turn gives the round.
void job_round(JobRuns& runs, std::int64_t round, JobSeries& series) {
  const auto& comm = runs.comm;
  const auto suffix = "-" + std::to_string(round);
  const auto limit_file = [&](const char* kind) {
    return runs.directory / (std::string(kind) + suffix + "-rank-" + std::to_string(comm.rank()));
  };
  std::size_t saves = 0;
  std::size_t mpiio_saves = 0;
  std::size_t none_saves = 0;
  std::size_t async_saves = 0;
  const auto before = series.sync_breakdowns.slowest_seconds.size();
  in_turn(
      round,
      {[&] {
         series.sync_run.seconds.push_back(run_with_checkpoints(
             runs, runs.sync, "sync" + suffix, "epoch", series.sync_breakdowns, saves));
       },
       [&] {
         series.write.seconds.push_back(timed(
             comm, series.write.name, [&] { write_limit(limit_file("plain"), *runs.touched); }));
         fs::remove(limit_file("plain"));
       },
       [&] {
         series.async_run.seconds.push_back(run_with_checkpoints(
             runs, runs.async, "async" + suffix, "save", series.async_breakdowns, async_saves));
       },
       [&] {
         series.hinted.seconds.push_back(timed(comm, series.hinted.name, [&] {
           write_limit(limit_file("hinted"), *runs.touched, Writeback::kHinted);
         }));
         fs::remove(limit_file("hinted"));
       },
       [&] { series.none_run.seconds.push_back(run_job(runs, runs.none, {}, none_saves)); },
       [&] {
         series.direct.seconds.push_back(timed(comm, series.direct.name, [&] {
           write_limit(limit_file("direct"), *runs.touched, Writeback::kDirect);
         }));
         fs::remove(limit_file("direct"));
       },
       [&] {
         series.mpiio_run.seconds.push_back(run_with_checkpoints(
             runs, runs.mpiio, "mpiio" + suffix, "epoch", series.mpiio_breakdowns, mpiio_saves));
       }});
  const auto cost = [&](const Series& run, std::size_t saved) {
    return (run.seconds.back() - series.none_run.seconds.back()) /
           double(std::max<std::size_t>(saved, 1));
  };
  series.save.seconds.push_back(cost(series.sync_run, saves));
  series.save_mpiio.seconds.push_back(cost(series.mpiio_run, mpiio_saves));
  // The metrics are rank 0's to read; every rank decides the rounds with the same figure.
  const auto& slowest = series.sync_breakdowns.slowest_seconds;
  double measured = median(
      std::vector<double>(slowest.begin() + static_cast<std::ptrdiff_t>(before), slowest.end()));
  comm.broadcast(measured);
  series.save_seconds.seconds.push_back(measured);
}

// The rows of measure_job, from the rounds' series.
nlohmann::json job_rows(const Communicator& comm, const JobBenchOptions& options,
                        const JobSeries& series, double bytes) {
  auto without_bandwidth = [](nlohmann::json row) {
    row.erase("mb_per_second");
    return row;
  };
  Series save_vs_hinted = series.save;
  save_vs_hinted.name = "job_save_vs_hinted_write";
  Series save_vs_direct = series.save;
  save_vs_direct.name = "job_save_vs_direct_write";
  auto rows = nlohmann::json::array();
  rows.push_back(with_target(compare(series.save, series.write, bytes), kJobSaveTarget));
  rows.push_back(with_target(compare(save_vs_hinted, series.hinted, bytes), kSaveHintedTarget));
  rows.push_back(with_target(compare(save_vs_direct, series.direct, bytes), kSaveHintedTarget));
  rows.push_back(compare(series.save_mpiio, series.write, bytes));
  rows.push_back(compare(series.save_seconds, series.write, bytes));
  rows.push_back(without_bandwidth(
      with_target(compare(series.async_run, series.none_run, bytes), kJobAsyncRunTarget)));
  rows.push_back(without_bandwidth(compare(series.sync_run, series.none_run, bytes)));
  rows.push_back(without_bandwidth(compare(series.mpiio_run, series.none_run, bytes)));
  rows.push_back(compare(series.write, series.write, bytes));
  rows.push_back(compare(series.hinted, series.hinted, bytes));
  rows.push_back(compare(series.direct, series.direct, bytes));
  rows.push_back(without_bandwidth(compare(series.none_run, series.none_run, bytes)));
  for (auto& row : rows) {
    row["job"] = options.job;
    row["epochs"] = options.epochs;
    row["job_options"] = options.job_arguments;
    row["bytes"] = bytes;
  }
  rows.push_back({{"name", "job_save_phases"},
                  {"what",
                   "each rank's median seconds per phase of one save, and its page faults, from "
                   "the runs' metrics.jsonl"},
                  {"job", options.job},
                  {"sync", series.sync_breakdowns.medians()},
                  {"sync_mpiio", series.mpiio_breakdowns.medians()},
                  {"async", series.async_breakdowns.medians()},
                  {"ranks", comm.size()}});
  return rows;
}

}  // namespace

Invocation job_invocation(const JobBenchOptions& options, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "run",         "--job", options.job,         "--num-epochs", std::to_string(options.epochs),
      "--log-level", "warn",  "--preempt-signals", "none"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), options.job_arguments.begin(), options.job_arguments.end());
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  auto invocation = parse_run_options(static_cast<int>(args.size()), argv.data());
  if (!invocation) {
    throw UsageError("bench --job: no --help among the job's options");
  }
  return std::move(*invocation);
}

void check_job_options(const JobBenchOptions& options) {
  for (const auto mode : {Mode::kSync, Mode::kSyncMpiIo, Mode::kAsync, Mode::kNone}) {
    (void)invocation_for(options, mode);
  }
}

nlohmann::json measure_job(const Communicator& comm, const fs::path& directory,
                           const JobBenchOptions& options, MeasureSettings& settings) {
  JobRuns runs{comm,
               directory,
               invocation_for(options, Mode::kSync),
               invocation_for(options, Mode::kSyncMpiIo),
               invocation_for(options, Mode::kAsync),
               invocation_for(options, Mode::kNone),
               std::nullopt};
  // Untimed: the job's code and files warm, and touched memory of the job's size for the
  // limits of the first round.
  std::size_t saves = 0;
  run_job(runs, runs.none, {}, saves);
  JobSeries series;
  for (std::int64_t round = 0;; ++round) {
    job_round(runs, round, series);
    if (last_round(
            settings, round,
            {ratios(series.save, series.write), ratios(series.save, series.hinted),
             ratios(series.save, series.direct), ratios(series.async_run, series.none_run)})) {
      break;
    }
  }
  const double bytes = comm.allreduce(double(runs.touched->byte_size()), Reduction::kSum);
  return job_rows(comm, options, series, bytes);
}

void print_job_phases(const nlohmann::json& row) {
  for (const char* kind : {"sync", "sync_mpiio", "async"}) {
    const auto& ranks = row.at(kind);
    if (ranks.empty()) {
      continue;
    }
    const std::string name = kind;
    std::printf("one %s save of %s by phase (median seconds over %lld saves per rank):\n",
                name == "sync"         ? "synchronous"
                : name == "sync_mpiio" ? "synchronous --array-io mpiio"
                                       : "asynchronous",
                row["job"].get<std::string>().c_str(), ranks[0]["saves"].get<long long>());
    std::printf("  %-12s", "phase");
    for (const auto& rank : ranks) {
      std::printf(" %9s", ("rank " + rank["rank"].dump()).c_str());
    }
    std::printf("\n");
    for (const char* phase : kSavePhaseNames) {
      std::printf("  %-12s", phase);
      for (const auto& rank : ranks) {
        std::printf(" %9.4f", rank["phases"][phase].get<double>());
      }
      std::printf("\n");
    }
    for (const char* figure : {"save_seconds", "minor_faults", "major_faults"}) {
      std::printf("  %-12s", figure);
      for (const auto& rank : ranks) {
        std::printf(figure == std::string("save_seconds") ? " %9.4f" : " %9.0f",
                    rank[figure].get<double>());
      }
      std::printf("\n");
    }
  }
}

}  // namespace epochrun::cli
