// `epochrun bench`: how close a checkpoint save and load come to the disk, measured against
// the limits of the same bytes on the same ranks in the same run (bench_measures.hpp says what
// each measure times); with --targets, the targets at their sizes (save and load against the
// disk, many small blobs against one, a commit into a long history against a short one), each
// printed with its measured ratio, its limit and MET or NOT MET; with --global-arrays, a global
// array's collective save and load (global_array_bench.hpp) against the same limits; with
// --verify, `epochrun inspect --verify`'s verification of a file against reading and hashing its
// bytes (verify_bench.hpp).
//
// Rounds alternate the order, A B then B A: a disk drains a burst for seconds after it, and
// whatever runs second would otherwise always pay for what ran first. Ratios are medians of
// the per-round ratios, so each compares two measures taken seconds apart.
#include <malloc.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/bench_measures.hpp"
#include "bench/global_array_bench.hpp"
#include "bench/job_bench.hpp"
#include "bench/local_level_bench.hpp"
#include "bench/machine_figures.hpp"
#include "bench/redundancy_bench.hpp"
#include "bench/scale_bench.hpp"
#include "bench/verify_bench.hpp"
#include "collective_errors.hpp"
#include "command_line.hpp"
#include "epochrun/epochrun.hpp"
#include "json_text.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct BenchOptions {
  double mib_per_rank = 256;
  std::int64_t blobs = 1;
  std::int64_t rounds = 5;
  std::string directory = "epochrun-bench";
  bool cold = false;
  std::string json_file;
  bool targets = false;
  bool global_arrays = false;
  bool redundancy = false;
  bool scale = false;
  bool verify = false;
  std::string layout_ranks = "1000,10000,100000";
  std::int64_t layout_blobs = 10;
  std::int64_t small_blobs = 10'000;
  std::int64_t history = 3'000;
  std::int64_t commits = 20;
  std::string history_directory;  // empty: inside --dir
  std::int64_t max_rounds = 15;
  double machine_mib = 256;
  JobBenchOptions job;    // --job: empty job name when not given
  std::string local_dir;  // --local-dir: the node-local level measured instead
};

// --targets' help: what each target compares and its limit, taken from the limits the
// verdicts use.
std::string targets_help() {
  char text[640];
  std::snprintf(text, sizeof text,
                "measure the targets, each MET when its ratio is at most its limit: a save of "
                "--mib-per-rank in one blob against pwrite + fsync of the same bytes (%g), its "
                "load against pread into fresh buffers (%g), --small-blobs blobs of 1 KiB "
                "against the same bytes as one blob, saved and loaded (%g), a commit after "
                "--history epochs against one after 10 (%g); each printed MET or NOT MET",
                kSaveTarget, kLoadTarget, kSmallBlobsTarget, kCommitCostTarget);
  return text;
}

// --global-arrays' help, with the targets its verdicts use.
std::string global_arrays_help() {
  char text[640];
  std::snprintf(text, sizeof text,
                "measure a global array instead: a 2-D float64 array, each rank's block "
                "(--mib-per-rank) over the process grid, saved collectively (MPI-IO, as a "
                "checkpoint, and parallel HDF5's H5Dwrite) against pwrite + fsync of the same "
                "bytes (%g), loaded collectively (every block verified, and H5Dread) against "
                "pread into fresh buffers (%g), and loaded at one rank fewer against pread of "
                "the same bytes on those ranks (%g)",
                kArraySaveTarget, kArrayLoadTarget, kArrayLoadTarget);
  return text;
}

po::options_description bench_options_description(BenchOptions& o) {
  const std::string targets = targets_help();
  const std::string global_arrays = global_arrays_help();
  po::options_description options(
      "mpirun -np R epochrun bench [options]: checkpoint save and load against plain POSIX "
      "I/O of the same bytes");
  options.add_options()("help,h", "print this help")(
      "mib-per-rank", po::value(&o.mib_per_rank)->default_value(o.mib_per_rank),
      "bytes each rank checkpoints, in MiB (fractions allowed: 0.5 is 512 KiB)")(
      "blobs", po::value(&o.blobs)->default_value(o.blobs),
      "blobs each rank's bytes are split into")(
      "rounds", po::value(&o.rounds)->default_value(o.rounds),
      "rounds of each measure, at least 5 (min, median and max are reported)")(
      "dir", po::value(&o.directory)->default_value(o.directory),
      "working directory on the file system to measure: must be new or empty; removed at "
      "the end")("cold", po::bool_switch(&o.cold),
                 "drop the page cache before every read (needs root), so reads come from the "
                 "disk")("json", po::value(&o.json_file),
                         "also write the results to this JSON file")(
      "targets", po::bool_switch(&o.targets), targets.c_str())(
      "global-arrays", po::bool_switch(&o.global_arrays), global_arrays.c_str())(
      "redundancy", po::bool_switch(&o.redundancy),
      "measure --local-redundancy instead, each rank a host of its own with a node-local copy of "
      "--mib-per-rank: the partner exchange and the XOR exchange against MPI_Sendrecv of the "
      "same bytes between the same ranks, the XOR arithmetic against a memcpy of the same bytes "
      "(1.25 each; 2 ranks at least)")("scale", po::bool_switch(&o.scale), scale_help().c_str())(
      "verify", po::bool_switch(&o.verify),
      "measure `epochrun inspect --verify` instead: a checkpoint of --mib-per-rank per rank (a "
      "global array's band each) verified as inspect verifies it, against the floor of the same "
      "bytes read in reads of 1 MiB and hashed with xxh64, from the disk (the file's pages "
      "dropped before each read) and from the page cache (1.25 each)")(
      "layout-ranks", po::value(&o.layout_ranks)->default_value(o.layout_ranks),
      "--scale: the rank counts of the one-process lay-out, comma-separated, or none")(
      "layout-blobs", po::value(&o.layout_blobs)->default_value(o.layout_blobs),
      "--scale: per-node blobs in the one-process lay-out")(
      "small-blobs", po::value(&o.small_blobs)->default_value(o.small_blobs),
      "--targets: blobs of 1 KiB per rank")("history",
                                            po::value(&o.history)->default_value(o.history),
                                            "--targets: committed epochs before the timed commits")(
      "commits", po::value(&o.commits)->default_value(o.commits),
      "--targets: tiny checkpoints committed per round into each history")(
      "history-dir", po::value(&o.history_directory),
      "--targets: where the histories are built (new or empty; removed at the end; tmpfs "
      "builds them fastest); default: inside --dir")(
      "max-rounds", po::value(&o.max_rounds)->default_value(o.max_rounds),
      "after --rounds, more rounds (up to this many in all) until the median of each target's "
      "per-round ratio is known within +-5% (its 95% interval); the report says when it was not")(
      "machine-mib", po::value(&o.machine_mib)->default_value(o.machine_mib),
      "MiB per rank of the machine's figures printed first (fresh memory, page-cache copy, "
      "plain and hinted disk writes)")(
      "local-dir", po::value(&o.local_dir),
      "DIR on node-local storage: measure the node-local level instead: its save of "
      "--mib-per-rank against the raw write of the same bytes there (1.15); with --job, the "
      "job run with --flush-every 10 against flushing every checkpoint, and the bytes each "
      "leaves in --dir")(
      "job", po::value(&o.job.job),
      "measure inside this registered job instead (epochrun list-jobs), its options after it "
      "(--<job>.<key> VALUE): the job run with synchronous checkpoints, asynchronous ones and "
      "none for --num-epochs epochs, a save's cost against pwrite + fsync of the same bytes "
      "(1.11) and with writeback hints (1.10), the asynchronous run against the run without "
      "checkpoints (1.10), and one save's time by phase")(
      "num-epochs", po::value(&o.job.epochs)->default_value(o.job.epochs),
      "--job: epochs of each run");
  return options;
}

// UsageError for the first option out of its range or contradicting another.
void check_bench_options(const BenchOptions& o) {
  if (!std::isfinite(o.mib_per_rank) || o.mib_per_rank <= 0 || o.mib_per_rank > 1 << 20) {
    throw UsageError("--mib-per-rank must be in (0, 1048576]");
  }
  if (o.blobs < 1 || o.blobs > 1'000'000) {
    throw UsageError("--blobs must be in [1, 1000000]");
  }
  if (std::llround(o.mib_per_rank * (1 << 20)) < o.blobs) {
    throw UsageError("--blobs must not exceed the bytes per rank (one byte per blob at least)");
  }
  if (o.rounds < 5) {
    throw UsageError("--rounds must be at least 5: a median of fewer says little");
  }
  if (o.directory.empty()) {
    throw UsageError("--dir must not be empty");
  }
  if (o.targets && o.blobs != 1) {
    throw UsageError("--targets saves one blob per rank; --blobs does not go with it");
  }
  if (o.global_arrays && (o.targets || o.blobs != 1)) {
    throw UsageError(
        "--global-arrays measures one array per run; --targets and --blobs do not go with it");
  }
  if (o.scale && (o.targets || o.global_arrays || o.blobs != 1)) {
    throw UsageError(
        "--scale measures one tiny blob per rank; --targets, --global-arrays and --blobs do not "
        "go with it");
  }
  if (o.redundancy && (o.targets || o.global_arrays || o.scale || o.blobs != 1)) {
    throw UsageError(
        "--redundancy measures one node-local copy per rank; --targets, --global-arrays, --scale "
        "and --blobs do not go with it");
  }
  if (o.verify && (o.targets || o.global_arrays || o.scale || o.redundancy || o.blobs != 1 ||
                   !o.local_dir.empty() || !o.job.job.empty())) {
    throw UsageError(
        "--verify measures the verification of one checkpoint; --targets, --global-arrays, "
        "--scale, --redundancy, --local-dir, --job and --blobs do not go with it");
  }
  if (o.scale) {
    parse_layout_ranks(o.layout_ranks);
  }
  if (o.layout_blobs < 1 || o.layout_blobs > 10'000) {
    throw UsageError("--layout-blobs must be in [1, 10000]");
  }
  if (o.max_rounds < o.rounds || o.max_rounds > 1000) {
    throw UsageError("--max-rounds must be in [--rounds, 1000]");
  }
  if (!std::isfinite(o.machine_mib) || o.machine_mib < 1.0 / 256 || o.machine_mib > 1 << 20) {
    throw UsageError("--machine-mib must be in [1/256, 1048576]");
  }
  if (!o.local_dir.empty() && (o.targets || o.global_arrays || o.scale || o.redundancy)) {
    throw UsageError(
        "--local-dir measures the node-local level; --targets, --global-arrays, --scale and "
        "--redundancy do not go with it");
  }
  if (o.local_dir.empty() && !o.job.job.empty() &&
      (o.targets || o.global_arrays || o.scale || o.redundancy || o.blobs != 1)) {
    throw UsageError(
        "--job measures inside a job; --targets, --global-arrays, --scale and --blobs do not go "
        "with it");
  }
  if (o.job.epochs < 1 || o.job.epochs > 1'000'000) {
    throw UsageError("--num-epochs must be in [1, 1000000]");
  }
  if (!o.job.job.empty()) {
    check_job_options(o.job);
  }
  if (o.small_blobs < 1 || o.small_blobs > 1'000'000 || o.history < 10 || o.history > 1'000'000 ||
      o.commits < 1 || o.commits > 10'000) {
    throw UsageError(
        "--small-blobs must be in [1, 1000000], --history in [10, 1000000], --commits in [1, "
        "10000]");
  }
}

std::optional<BenchOptions> parse_bench_options(int argc, char** argv) {
  BenchOptions o;
  const auto options = bench_options_description(o);
  po::variables_map values;
  const auto parsed =
      po::command_line_parser(argc, argv).options(options).allow_unregistered().run();
  po::store(parsed, values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << options << "\n";
    return std::nullopt;
  }
  if (o.scale && values["mib-per-rank"].defaulted()) {
    o.mib_per_rank = kScaleMibPerRank;
  }
  // The job's own options go to it (and its parser refuses the ones it does not know).
  o.job.job_arguments = po::collect_unrecognized(parsed.options, po::include_positional);
  if (o.job.job.empty() && !o.job.job_arguments.empty()) {
    throw UsageError("unrecognised option '" + o.job.job_arguments.front() + "'");
  }
  check_bench_options(o);
  return o;
}

bool is_timing(const nlohmann::json& row) {
  return row.contains("ratio");
}

// The first line of the table: what was measured, how and where.
void print_heading(const nlohmann::json& rows, const BenchOptions& options, int ranks, bool cold,
                   const fs::path& directory) {
  if (!options.local_dir.empty()) {
    const auto job = options.job.job.empty()
                         ? std::string()
                         : "; job " + options.job.job + ", " + std::to_string(options.job.epochs) +
                               " epochs a run";
    std::printf(
        "epochrun bench --local-dir %s: %d ranks, %g MiB per rank in %lld blobs%s, at least "
        "%lld rounds (alternated), the checkpoint directory in %s\n",
        options.local_dir.c_str(), ranks, options.mib_per_rank,
        static_cast<long long>(options.blobs), job.c_str(), static_cast<long long>(options.rounds),
        directory.c_str());
    return;
  }
  if (!options.job.job.empty()) {
    std::printf(
        "epochrun bench --job %s: %d ranks, %lld epochs a run, %s, at least %lld rounds "
        "(A B C D E, E D C B A, ...), in %s\n",
        options.job.job.c_str(), ranks, static_cast<long long>(options.job.epochs),
        rows.at(1)["job_options"].dump().c_str(), static_cast<long long>(options.rounds),
        directory.c_str());
    return;
  }
  if (options.verify) {
    std::printf(
        "epochrun bench --verify: %d ranks x %g MiB (one file of %.0f bytes, verified by rank "
        "0), at least %lld rounds (A B C, C B A, ...), cold (the file's pages dropped%s) and "
        "warm, in %s\n",
        ranks, options.mib_per_rank, rows.at(1)["file_bytes"].get<double>(),
        static_cast<long long>(options.rounds), cold ? ", and the whole page cache" : "",
        directory.c_str());
    return;
  }
  if (options.global_arrays) {
    const auto& first = rows.at(1);
    std::printf(
        "epochrun bench --global-arrays: %d ranks, float64 array %s over a process grid %s, "
        "%.0f bytes per rank, %lld rounds (A B C, C B A, ...), %s, in %s\n",
        ranks, first["array_shape"].dump().c_str(), first["process_grid"].dump().c_str(),
        first["bytes_per_rank"].get<double>(), static_cast<long long>(options.rounds),
        cold ? "cold reads"
             : "reads from the disk (a checkpoint's save drops what it wrote from the page "
               "cache, and the other files' pages are dropped alike)",
        directory.c_str());
    return;
  }
  std::printf(
      "epochrun bench: %d ranks x %g MiB in %lld blob(s) each, %lld rounds (A B, B A, ...), "
      "%s reads, in %s\n",
      ranks, options.mib_per_rank, static_cast<long long>(options.blobs),
      static_cast<long long>(options.rounds), cold ? "cold" : "page-cache", directory.c_str());
}

void print_table(const nlohmann::json& rows, const BenchOptions& options, int ranks, bool cold,
                 const fs::path& directory) {
  if (!rows.empty() && rows[0]["name"] == "machine") {
    print_machine(rows[0]);
  }
  print_heading(rows, options, ranks, cold, directory);
  // Columns as wide as the longest name (the global arrays' are longer than the others').
  int name_width = 20;
  int limit_width = 16;
  for (const auto& row : rows) {
    if (is_timing(row)) {
      name_width = std::max(name_width, int(row["name"].get<std::string>().size()));
      limit_width = std::max(limit_width, int(row["limit"].get<std::string>().size()));
    }
  }
  std::printf("%-*s %-*s %9s %9s %9s %9s %7s %7s\n", name_width, "measure", limit_width, "limit",
              "MB/s", "min s", "median s", "max s", "ratio", "target");
  for (const auto& row : rows) {
    if (!is_timing(row)) {
      continue;
    }
    char mb_per_second[32] = "-";  // none for the commit cost: its checkpoints are tiny
    if (row.contains("mb_per_second")) {
      std::snprintf(mb_per_second, sizeof mb_per_second, "%.0f",
                    row["mb_per_second"].get<double>());
    }
    std::printf("%-*s %-*s %9s %9.4f %9.4f %9.4f %7.3f %7s\n", name_width,
                row["name"].get<std::string>().c_str(), limit_width,
                row["limit"].get<std::string>().c_str(), mb_per_second,
                row["min_seconds"].get<double>(), row["median_seconds"].get<double>(),
                row["max_seconds"].get<double>(), row["ratio"].get<double>(),
                row.contains("target") ? row["target"].dump().c_str() : "");
  }
  std::printf(
      "ratio: median over the rounds of measure / limit, each pair timed in the same "
      "round\n");
  for (const auto& row : rows) {
    if (is_timing(row) && !row.value("ratio_stable", true)) {
      const auto& interval = row["ratio_interval"];
      std::printf("  %-*s ratio NOT stable within +-5%% after %lld rounds: 95%% interval %s\n",
                  name_width, row["name"].get<std::string>().c_str(),
                  row["rounds"].get<long long>(),
                  interval.is_null() ? "unknown (fewer than 6 rounds)"
                                     : ("[" + std::to_string(interval[0].get<double>()) + ", " +
                                        std::to_string(interval[1].get<double>()) + "]")
                                           .c_str());
    }
  }
  for (const auto& row : rows) {
    if (row["name"] != "machine") {
      std::printf("  %-*s %s\n", name_width, row["name"].get<std::string>().c_str(),
                  row["what"].get<std::string>().c_str());
    }
  }
  for (const auto& row : rows) {
    if (row["name"] == "job_save_phases") {
      print_job_phases(row);
    }
  }
  for (const auto& row : rows) {
    if (row.contains("steps")) {
      std::string steps;
      for (const auto& [step, seconds] : row["steps"].items()) {
        char figure[32];
        std::snprintf(figure, sizeof figure, " %.4f", seconds.get<double>());
        steps += (steps.empty() ? "" : ", ") + step + figure;
      }
      std::printf("%s: rank 0's median seconds per step: %s\n",
                  row["name"].get<std::string>().c_str(), steps.c_str());
    }
  }
  constexpr double kMiB = 1 << 20;
  for (const auto& row : rows) {
    if (row.contains("peak_added_bytes")) {
      std::printf(
          "%s: peak resident memory %.1f MiB, %.1f MiB more than before it, for a state of "
          "%.1f MiB per rank (the largest rank)\n",
          row["name"].get<std::string>().c_str(), row["peak_rss_bytes"].get<double>() / kMiB,
          row["peak_added_bytes"].get<double>() / kMiB, row["state_bytes"].get<double>() / kMiB);
    }
  }
  for (const auto& row : rows) {
    if (row.contains("shared_bytes")) {
      std::printf("%s: %.3f MiB left in the checkpoint directory, against %.3f MiB (ratio %.3f)\n",
                  row["name"].get<std::string>().c_str(), row["shared_bytes"].get<double>() / kMiB,
                  row["limit_shared_bytes"].get<double>() / kMiB,
                  row["shared_bytes_ratio"].get<double>());
    }
  }
  if (options.scale) {
    print_scale(rows);
  }
  if (options.targets || options.global_arrays || options.scale || options.redundancy ||
      options.verify || !options.job.job.empty() || !options.local_dir.empty()) {
    std::printf("targets (ratio <= limit):\n");
    for (const auto& row : rows) {
      if (row.contains("met") && row.contains("ratio")) {
        std::printf("  %-20s ratio %6.3f  limit %4.2f  %s\n",
                    row["name"].get<std::string>().c_str(), row["ratio"].get<double>(),
                    row["target"].get<double>(),
                    row["met"].get<bool>()  ? "MET"
                    : row.contains("flags") ? "FLAGGED"
                                            : "NOT MET");
        for (const auto& flag : row.value("flags", nlohmann::json::array())) {
          std::printf("    flagged: %s\n", flag.get<std::string>().c_str());
        }
      }
    }
  }
  std::fflush(stdout);
}

// Rank 0: a working directory must be new or empty, since all of it is removed at the end.
void prepare_directory(const fs::path& directory, const std::string& flag) {
  std::error_code error;
  if (fs::exists(directory, error) &&
      (!fs::is_directory(directory, error) || !fs::is_empty(directory, error))) {
    throw UsageError(flag + " " + directory.string() +
                     " exists and is not an empty directory; bench removes its directory at the "
                     "end, so give it a new one");
  }
  fs::create_directories(directory / "plain", error);
  if (error) {
    throw UsageError("cannot create " + directory.string() + ": " + error.message());
  }
}

// Every measure the options ask for, in the order they are printed.
nlohmann::json measure(const BenchOptions& options, const Communicator& comm,
                       const fs::path& directory, const fs::path& history_directory, bool& cold) {
  MeasureSettings settings{options.rounds, options.max_rounds, options.cold};
  const auto bytes_per_rank =
      static_cast<std::uint64_t>(std::llround(options.mib_per_rank * (1 << 20)));
  auto rows = nlohmann::json::array();
  if (!options.scale) {  // tiny checkpoints: their fixed cost is not the disk's or memory's
    rows.push_back(
        measure_machine(comm, directory,
                        static_cast<std::uint64_t>(std::llround(options.machine_mib * (1 << 20)))));
  }
  for (auto& row :
       options.scale ? measure_scale(comm, directory, bytes_per_rank, settings)
       : !options.local_dir.empty()
           ? measure_local_levels(comm, directory, options.local_dir, bytes_per_rank, options.blobs,
                                  options.job, settings)
       : !options.job.job.empty() ? measure_job(comm, directory, options.job, settings)
       : options.global_arrays    ? measure_global_arrays(comm, directory, bytes_per_rank, settings)
       : options.redundancy       ? measure_redundancy(comm, directory, bytes_per_rank, settings)
       : options.verify           ? measure_verify(comm, directory, bytes_per_rank, settings)
                        : measure_disk(comm, directory, bytes_per_rank, options.blobs, settings,
                                       options.targets)) {
    rows.push_back(std::move(row));
  }
  if (options.scale) {
    run_on_root_then_agree(comm, "lay-out", [&] {
      for (auto& row : measure_layout(directory, parse_layout_ranks(options.layout_ranks),
                                      options.layout_blobs)) {
        rows.push_back(std::move(row));
      }
    });
  }
  if (options.targets) {
    for (auto& row : measure_small_blobs(comm, directory, options.small_blobs, settings)) {
      rows.push_back(std::move(row));
    }
    for (auto& row :
         measure_commit_cost(comm, history_directory, options.history, options.commits, settings)) {
      rows.push_back(std::move(row));
    }
  }
  cold = settings.cold;
  for (auto& row : rows) {
    if (row["name"] == "machine") {
      continue;
    }
    row.update({{"ranks", comm.size()},
                {"mib_per_rank", options.mib_per_rank},
                {"blobs", options.blobs},
                {"min_rounds", options.rounds},
                {"cold", cold}});
    if (!row.contains("rounds")) {
      row["rounds"] = options.rounds;  // rows without per-round ratios
    }
    if (options.global_arrays || !options.job.job.empty()) {
      row.erase("blobs");  // one array, or the job's own blobs
    }
    if (!options.job.job.empty()) {
      row.erase("mib_per_rank");  // the job's options decide its size
    }
  }
  return rows;
}

// Rank 0, before anything is measured: prepares --dir (and --history-dir when it is given
// with --targets) and opens --json. A failure removes what it prepared a moment ago.
void prepare_outputs(const BenchOptions& options, const fs::path& directory,
                     const fs::path& history_directory, bool own_history_directory,
                     std::ofstream& json_out) {
  prepare_directory(directory, "--dir");
  if (own_history_directory) {
    try {
      prepare_directory(history_directory, "--history-dir");
    } catch (const UsageError&) {
      fs::remove_all(directory);  // new or empty a moment ago
      throw;
    }
  }
  if (!options.json_file.empty()) {
    json_out.open(options.json_file);
    if (!json_out) {
      const std::string reason = std::strerror(errno);
      fs::remove_all(directory);  // new or empty a moment ago
      if (own_history_directory) {
        fs::remove_all(history_directory);
      }
      throw UsageError("cannot write --json " + options.json_file + ": " + reason);
    }
  }
}

// Every rank measures; rank 0 prints the table and writes the rows to `json_out` when open.
void measure_and_report(const BenchOptions& options, const Communicator& world,
                        const fs::path& directory, const fs::path& history_directory,
                        std::ofstream& json_out) {
  bool cold = options.cold;
  const auto rows = measure(options, world, directory, history_directory, cold);
  if (world.is_root()) {
    print_table(rows, options, world.size(), cold, directory);
    if (json_out.is_open()) {
      json_out << json_text(rows, 2) << "\n";
      json_out.close();
      if (!json_out) {
        throw Error("cannot write " + options.json_file);
      }
    }
  }
}

}  // namespace

int bench_command(int argc, char** argv) {
  std::optional<BenchOptions> options;
  try {
    options = parse_bench_options(argc, argv);
  } catch (const std::exception& error) {
    return report_failure(error);
  }
  if (!options) {
    return exit_status(ExitCode::kSuccess);
  }

  // A restarted process reads its checkpoint into memory it has never touched. glibc would
  // instead serve a buffer freed in the previous round from its heap, already faulted in (its
  // mmap threshold grows with every large free, up to 32 MiB), and flatter both reads below
  // that size. A fixed threshold gives every large buffer, the loads' and the limit's, new
  // pages each round.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  MpiSession mpi(argc, argv);
  const auto world = Communicator::world();
  configure_logging(world.rank(), LogLevel::kWarn);
  const fs::path directory = options->directory;
  const fs::path history_directory = options->history_directory.empty()
                                         ? directory / "history"
                                         : fs::path(options->history_directory);
  const bool own_history_directory = !options->history_directory.empty() && options->targets;
  // Opened before anything is measured: a typo in --json must not cost minutes of rounds.
  std::ofstream json_out;
  try {
    run_on_root_then_agree(world, "bench", [&] {
      prepare_outputs(*options, directory, history_directory, own_history_directory, json_out);
    });
  } catch (const std::exception& error) {
    print_error(error.what());  // and the directory, not ours, is left alone
    return exit_status(exit_code_for(error));
  }
  auto status = ExitCode::kSuccess;
  try {
    measure_and_report(*options, world, directory, history_directory, json_out);
  } catch (const std::exception& error) {
    print_error(error.what());
    status = exit_code_for(error);
  }
  world.barrier();
  if (world.is_root()) {
    std::error_code ignored;
    fs::remove_all(directory, ignored);
    if (own_history_directory) {
      fs::remove_all(history_directory, ignored);
    }
  }
  return exit_status(status);
}

}  // namespace epochrun::cli
