#include "bench/scale_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "bench/bench_rounds.hpp"
#include "bench/median.hpp"
#include "checkpoint_directory_admin.hpp"
#include "checkpoint_layout_v3.hpp"
#include "checkpoint_saver.hpp"
#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/global_array.hpp"
#include "epochrun/job.hpp"
#include "mpi_io_file.hpp"
#include "post_commit_steps.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kJob = "bench";

std::vector<std::string> node_names(int ranks) {
  std::vector<std::string> names;
  for (int rank = 0; rank < ranks; ++rank) {
    names.push_back(Job::node_name(rank));
  }
  return names;
}

CheckpointOptions options_for(const fs::path& directory) {
  CheckpointOptions options;
  options.checkpoint_dir = directory;
  return options;
}

// The job's own save path, set up once (untimed) as a run sets it up: the saver with its
// post-commit steps (rank 0's index.json after every commit, retention). Every blob per-node,
// or, with `array`, the one blob a global array of that global shape split in `blocks`.
struct JobSavePath {
  JobSavePath(const Communicator& comm, const fs::path& directory, const Workspace& workspace,
              const Shape& array = {}, std::shared_ptr<const std::vector<Block>> blocks = {})
      : options(options_for(directory)),
        post_commit(comm, options, kJob),
        saver(kJob, comm, options, node_names(comm.size()), post_commit) {
    std::vector<BlobPlan> plans;
    for (const auto& name : workspace.names()) {
      plans.push_back(array.empty() ? BlobPlan{name, StorageKind::kPerNode, {}, nullptr}
                                    : BlobPlan{name, StorageKind::kGlobalArray, array, blocks});
    }
    saver.set_blobs(std::move(plans));
  }
  CheckpointOptions options;
  PostCommitSteps post_commit;
  CheckpointSaver saver;
};

// Returns the save's seconds as metrics.jsonl records them (SaveOutcome::seconds).
double save_through_the_job_path(JobSavePath& path, std::int64_t epoch,
                                 const Workspace& workspace) {
  const auto outcome = path.saver.save(epoch, workspace, false);
  if (!outcome.committed) {
    throw Error(outcome.failure.value_or(outcome.log));
  }
  return outcome.seconds;
}

// The global array heat_diffusion saves, of the same bytes per rank as `bytes`: 8 rows of 1024
// f64 cells per rank (64 KiB), split over the ranks as heat_diffusion splits its field (the
// balanced decomposition: bands of whole rows up to 3 ranks, a 2-D grid beyond, 12 x 8 at 96).
// The rank's block, filled from `bytes`, as a workspace of one blob.
struct ScaleArray {
  static constexpr std::uint64_t kColumns = 1024;
  Shape shape;
  std::shared_ptr<const std::vector<Block>> blocks;
  Workspace workspace;

  ScaleArray(const Communicator& comm, std::span<const std::byte> bytes) {
    const std::uint64_t rows = std::max<std::uint64_t>(1, bytes.size() / (8 * kColumns));
    shape = {rows * static_cast<std::uint64_t>(comm.size()), kColumns};
    std::vector<Block> all;
    for (int rank = 0; rank < comm.size(); ++rank) {
      all.push_back(balanced_block(shape, comm.size(), rank));
    }
    blocks = std::make_shared<const std::vector<Block>>(std::move(all));
    Blob band(DType::kF64, blocks->at(static_cast<std::size_t>(comm.rank())).count);
    const auto into = band.raw();
    std::copy_n(bytes.begin(), std::min(bytes.size(), into.size()), into.begin());
    workspace.put("field", std::move(band));
  }
};

void load_through_the_resume_path(const Communicator& comm, const fs::path& directory,
                                  std::int64_t epoch) {
  Workspace into;
  load_checkpoint(CheckpointDirectory(directory), comm,
                  LoadRequest{epoch, kJob, node_names(comm.size()), {}, {}, {}, {}}, into);
}

// Throws on every rank when any rank's status is not 0 (rank 0 learns it from the gather and
// broadcasts the verdict), as a hand-made protocol must. When every rank succeeded, rank 0 runs
// `commit` before it broadcasts (its failure is the verdict too).
void agree_by_gather(const Communicator& comm, int status, const char* step,
                     const std::function<void()>& commit = {}) {
  int failed = 0;
  if (comm.is_root()) {
    const auto statuses = comm.gather(status);
    failed = std::any_of(statuses.begin(), statuses.end(), [](int s) { return s != 0; });
    if (failed == 0 && commit) {
      try {
        commit();
      } catch (const Error&) {
        failed = 1;
      }
    }
  } else {
    comm.gather(status);
  }
  comm.broadcast(failed);
  if (failed != 0) {
    throw Error(std::string("hand-made ") + step + " failed on some rank");
  }
}

// The hand-made commit around `write` (this rank's bytes into the new file it is given): rank 0
// creates `name`.tmp in `directory` and broadcasts that it did; every rank writes; a gather of one
// status per rank; rank 0 renames the file to `name`.done and fsyncs the directory; a broadcast
// of the verdict. Error on every rank, naming the hand-made `step`, when any step failed on any
// rank.
void commit_by_hand(const Communicator& comm, const fs::path& directory, const std::string& name,
                    const char* step, const std::function<void(const fs::path&)>& write) {
  const auto temporary = directory / (name + ".tmp");
  auto started = step_times::Clock::now();
  int created = 1;
  if (comm.is_root()) {
    try {
      create_new_file(temporary).close(temporary.string());
    } catch (const Error&) {
      created = 0;
    }
  }
  comm.broadcast(created);
  step_times::add_since("create", started);
  if (created == 0) {
    throw Error(std::string("hand-made ") + step + ": rank 0 could not create " +
                temporary.string());
  }
  int status = 0;
  try {
    write(temporary);
  } catch (const Error&) {
    status = 1;
  }
  started = step_times::Clock::now();
  agree_by_gather(comm, status, step,
                  [&] { rename_durably(temporary, directory / (name + ".done")); });
  step_times::add_since("commit", started);
}

void handmade_save(const Communicator& comm, const fs::path& directory, std::int64_t epoch,
                   std::span<const std::byte> bytes) {
  commit_by_hand(comm, directory, "handmade-" + std::to_string(epoch), "save",
                 [&](const fs::path& file) {
                   const auto started = step_times::Clock::now();
                   auto fd = open_regular_file_for_writing(file);
                   write_at(fd.get(), static_cast<std::uint64_t>(comm.rank()) * bytes.size(), bytes,
                            file.string());
                   sync_file(fd.get(), file.string());
                   fd.close(file.string());
                   step_times::add_since("write and fsync", started);
                 });
}

// The design's floor for a global array of interleaved blocks: the bare collective MPI-IO save
// of the same array, as scripts/collective_floor.c makes it outside the program. One collective
// open; each rank's block in one MPI_File_write_all over its subarray view; MPI_File_sync, each
// rank's written pages dropped (as a save drops them), close; around it the hand-made commit.
// No HDF5 lay-out, no checksum, no agreement: what the job's save costs beyond this is its own.
// (Bands of whole rows take the same calls; the job's save writes them directly.)
void collective_floor_save(const Communicator& comm, const fs::path& directory, std::int64_t epoch,
                           const ScaleArray& array) {
  commit_by_hand(comm, directory, "floor-" + std::to_string(epoch), "collective floor save",
                 [&](const fs::path& file) {
                   auto started = step_times::Clock::now();
                   MpiIoFile mpi_file(comm, file, MpiIoFile::Access::kWrite, {});
                   step_times::add_since("open", started);
                   started = step_times::Clock::now();
                   mpi_file.write_block_all(StoredArray{0, array.shape, sizeof(double)},
                                            array.blocks->at(static_cast<std::size_t>(comm.rank())),
                                            array.workspace.get("field").raw());
                   step_times::add_since("collective write", started);
                   started = step_times::Clock::now();
                   mpi_file.sync_and_close();
                   step_times::add_since("sync and close", started);
                 });
}

void handmade_load(const Communicator& comm, const fs::path& directory, std::int64_t epoch,
                   std::size_t bytes) {
  const auto file = directory / ("handmade-" + std::to_string(epoch) + ".done");
  // Rank 0 finds the file, as a resume finds its checkpoint, and says so.
  int found = comm.is_root() && std::filesystem::is_regular_file(file) ? 1 : 0;
  comm.broadcast(found);
  if (found == 0) {
    throw Error("hand-made load: " + file.string() + " is not there");
  }
  int status = 0;
  try {
    auto fd = open_regular_file_for_reading(file);
    auto buffer = std::make_unique<std::byte[]>(bytes);
    read_at(fd.get(), static_cast<std::uint64_t>(comm.rank()) * bytes,
            std::span<std::byte>(buffer.get(), bytes), file.string());
  } catch (const Error&) {
    status = 1;
  }
  agree_by_gather(comm, status, "load");
}

// What rank 0 recorded of one save or load, or of its hand-made equivalent.
struct Recorded {
  std::vector<std::pair<std::string, double>> steps;
  std::vector<std::pair<std::string, std::int64_t>> calls;  // MPI calls, by function
  double seconds = 0;
};

// Runs `step`, recording rank 0's steps and MPI calls (nothing elsewhere).
Recorded recorded(const Communicator& comm, const std::function<void()>& step) {
  step_times::record_on_this_thread(comm.is_root());
  const auto started = step_times::Clock::now();
  step();
  Recorded record;
  record.seconds = std::chrono::duration<double>(step_times::Clock::now() - started).count();
  record.steps = step_times::take();
  record.calls = step_times::take_calls();
  step_times::record_on_this_thread(false);
  return record;
}

nlohmann::json calls_of(const Recorded& record) {
  auto calls = nlohmann::json::object();
  for (const auto& [call, count] : record.calls) {
    calls[call] = count;
  }
  return calls;
}

// Rank 0's median seconds per step over the rounds, in the order the steps came.
nlohmann::json median_steps(const std::vector<Recorded>& rounds) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> seconds;
  std::vector<double> totals;
  for (const auto& round : rounds) {
    totals.push_back(round.seconds);
    for (const auto& [step, spent] : round.steps) {
      if (seconds.find(step) == seconds.end()) {
        order.push_back(step);
      }
      seconds[step].push_back(spent);
    }
  }
  auto steps = nlohmann::json::array();
  for (const auto& step : order) {
    steps.push_back({{"step", step}, {"median_seconds", median(seconds[step])}});
  }
  return nlohmann::json{
      {"rank0_total_median_seconds", median(totals)},
      {"steps", steps},
      {"rank0_mpi_calls", rounds.empty() ? nlohmann::json() : calls_of(rounds.back())}};
}

}  // namespace

std::string scale_help() {
  char text[768];
  std::snprintf(text, sizeof text,
                "measure the fixed cost instead: a tiny state (--mib-per-rank, default %g) saved "
                "and loaded as a run does, against a hand-made equivalent (pwrite + fsync, one "
                "gather, rename, one broadcast) (%g), and a global array of the same bytes "
                "split as heat_diffusion splits its field, also against the bare collective "
                "MPI-IO save of it (open, write_all, sync, close, then the same commit) (%g), "
                "with rank 0's time per step and its MPI calls; then the lay-out of a file for "
                "--layout-ranks ranks in one process (%g s at most for 100,000 ranks x 10 "
                "blobs, %g MiB of metadata per 1,000 ranks)",
                kScaleMibPerRank, kScaleTarget, kCollectiveFloorTarget, kLayoutSecondsTarget,
                kLayoutMetadataPerThousandRanks / (1 << 20));
  return text;
}

std::vector<std::int64_t> parse_layout_ranks(const std::string& text) {
  std::vector<std::int64_t> ranks;
  if (text == "none") {
    return ranks;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto part = text.substr(start, end - start);
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value < 1 || value > 1'000'000) {
      throw UsageError(
          "--layout-ranks must be rank counts in [1, 1000000], comma-separated, or "
          "none: '" +
          text + "'");
    }
    ranks.push_back(value);
    start = end + 1;
  }
  return ranks;
}

void print_scale(const nlohmann::json& rows) {
  for (const auto& row : rows) {
    if (row["name"] == "scale_steps") {
      for (const char* what : {"save", "hand-made save", "load", "hand-made load", "array save",
                               "hand-made array save", "collective floor array save"}) {
        const auto& steps = row[what];
        std::printf("rank 0 in one %s (median of the rounds, ms): %.3f\n", what,
                    steps["rank0_total_median_seconds"].get<double>() * 1e3);
        for (const auto& step : steps["steps"]) {
          std::printf("  %-28s %9.3f\n", step["step"].get<std::string>().c_str(),
                      step["median_seconds"].get<double>() * 1e3);
        }
        std::string calls;
        for (const auto& [call, count] : steps["rank0_mpi_calls"].items()) {
          calls +=
              (calls.empty() ? "" : ", ") + call + " " + std::to_string(count.get<long long>());
        }
        std::printf("  MPI calls and HDF5 file opens and creates: %s\n", calls.c_str());
      }
    } else if (row.contains("layout_ranks")) {
      std::printf(
          "lay-out for %7lld ranks x %lld blobs, one process: %8.3f s, %10.0f bytes of "
          "metadata (%.0f per 1,000 ranks)  %s\n",
          row["layout_ranks"].get<long long>(), row["layout_blobs"].get<long long>(),
          row["seconds"].get<double>(), row["metadata_bytes"].get<double>(),
          row["metadata_bytes_per_1000_ranks"].get<double>(),
          row["met"].get<bool>() ? "MET" : "NOT MET");
    }
  }
}

nlohmann::json measure_scale(const Communicator& comm, const fs::path& directory,
                             std::uint64_t bytes_per_rank, const MeasureSettings& settings) {
  const auto ours = directory / "scale-ours";
  const auto handmade = directory / "scale-handmade";
  const auto arrays = directory / "scale-arrays";
  run_on_root_then_agree(comm, "scale bench directories", [&] {
    fs::create_directories(ours);
    fs::create_directories(handmade);
    fs::create_directories(arrays);
  });
  const auto workspace = random_workspace(bytes_per_rank, 1, comm.rank());
  const auto& state = workspace.get(workspace.names().front());
  // Destroyed before the clean-up: their index and removal threads then have ended.
  std::optional<JobSavePath> path(std::in_place, comm, ours, workspace);
  const ScaleArray array(comm, state.raw());
  std::optional<JobSavePath> array_path(std::in_place, comm, arrays, array.workspace, array.shape,
                                        array.blocks);

  Series save{"scale_save", "the job's save of a tiny state: fixed cost", {}};
  Series save_limit{"scale_save_limit", "hand-made save of the same bytes", {}};
  Series load{"scale_load", "the job's load of it", {}};
  Series load_limit{"scale_load_limit", "hand-made load of the same bytes", {}};
  Series array_save{"scale_array_save",
                    "the job's save of a global array of the same bytes per rank, split as "
                    "heat_diffusion splits its field: fixed cost",
                    {}};
  Series array_save_seconds{"scale_array_save_seconds",
                            "the same saves as metrics.jsonl records them: the slowest rank's "
                            "save_seconds",
                            {}};
  Series array_save_limit{"scale_array_save_limit", "hand-made save of the same bytes", {}};
  Series array_save_floor{"scale_array_save_collective_floor",
                          "the bare collective MPI-IO save of the same array (open, write_all, "
                          "sync, close; gather, rename, broadcast): the design's floor",
                          {}};
  // Rank 0's records, round by round, of each of the seven.
  std::vector<Recorded> saves, handmade_saves, loads, handmade_loads, array_saves,
      handmade_array_saves, floor_array_saves;
  const auto measured = [&](Series& series, std::vector<Recorded>& records, const char* what,
                            const std::function<void()>& step) {
    return [&, what, step] {
      series.seconds.push_back(timed(comm, what, [&] { records.push_back(recorded(comm, step)); }));
    };
  };
  for (std::int64_t round = 0; round < settings.rounds; ++round) {
    const std::int64_t epoch = round + 1;
    alternate(
        round,
        measured(save, saves, "save", [&] { save_through_the_job_path(*path, epoch, workspace); }),
        measured(save_limit, handmade_saves, "hand-made save",
                 [&] { handmade_save(comm, handmade, epoch, state.raw()); }));
    alternate(
        round,
        measured(load, loads, "load", [&] { load_through_the_resume_path(comm, ours, epoch); }),
        measured(load_limit, handmade_loads, "hand-made load",
                 [&] { handmade_load(comm, handmade, epoch, state.byte_size()); }));
    double recorded_seconds = 0;
    in_turn(round, {measured(array_save, array_saves, "array save",
                             [&] {
                               recorded_seconds =
                                   save_through_the_job_path(*array_path, epoch, array.workspace);
                             }),
                    measured(array_save_limit, handmade_array_saves, "hand-made array save",
                             [&] {
                               handmade_save(comm, handmade, 1000 + epoch,
                                             array.workspace.get("field").raw());
                             }),
                    measured(array_save_floor, floor_array_saves, "collective floor array save",
                             [&] { collective_floor_save(comm, handmade, 2000 + epoch, array); })});
    array_save_seconds.seconds.push_back(comm.allreduce_max(recorded_seconds));
  }
  const double bytes = double(bytes_per_rank) * comm.size();
  auto rows = nlohmann::json::array();
  rows.push_back(with_target(compare(save, save_limit, bytes), kScaleTarget));
  rows.push_back(with_target(compare(load, load_limit, bytes), kScaleTarget));
  rows.push_back(with_target(compare(array_save, array_save_limit, bytes), kScaleTarget));
  rows.push_back(with_target(compare(array_save_seconds, array_save_limit, bytes), kScaleTarget));
  // The same saves against the floor of their design, measured in the same rounds.
  Series against_floor{"scale_array_save_vs_collective_floor",
                       "the job's save of the global array against the bare collective MPI-IO "
                       "save of it",
                       array_save.seconds};
  rows.push_back(
      with_target(compare(against_floor, array_save_floor, bytes), kCollectiveFloorTarget));
  rows.push_back({{"name", "scale_steps"},
                  {"what", "rank 0's milliseconds per step (median of the rounds) and MPI calls"},
                  {"save", median_steps(saves)},
                  {"hand-made save", median_steps(handmade_saves)},
                  {"load", median_steps(loads)},
                  {"hand-made load", median_steps(handmade_loads)},
                  {"array save", median_steps(array_saves)},
                  {"hand-made array save", median_steps(handmade_array_saves)},
                  {"collective floor array save", median_steps(floor_array_saves)}});
  path.reset();
  array_path.reset();
  run_on_root_then_agree(comm, "scale bench clean-up", [&] {
    fs::remove_all(ours);
    fs::remove_all(handmade);
    fs::remove_all(arrays);
  });
  return rows;
}

nlohmann::json measure_layout(const fs::path& directory, const std::vector<std::int64_t>& ranks,
                              std::int64_t blobs) {
  auto rows = nlohmann::json::array();
  for (const auto count : ranks) {
    FileDescription description{1, kJob, node_names(static_cast<int>(count)), "{}", {}, 1};
    for (std::int64_t b = 0; b < blobs; ++b) {
      description.blobs.push_back(BlobDescription{
          "blob_" + std::to_string(100 + b), StorageKind::kPerNode, DType::kU8, {8}, 0, {}});
    }
    const auto file = directory / ("layout-" + std::to_string(count) + ".h5");
    fs::remove(file);
    const auto started = step_times::Clock::now();
    auto fd = create_new_file(file);
    const auto layout = lay_out_checkpoint_file_v3(fd.get(), description, [] {});
    sync_file(fd.get(), file.string());
    const double seconds =
        std::chrono::duration<double>(step_times::Clock::now() - started).count();
    const double file_bytes = double(file_size(fd.get()));
    fd.close(file.string());
    fs::remove(file);
    const double values = double(count) * double(blobs) * 8;
    const double metadata = file_bytes - values;
    rows.push_back(
        {{"name", "layout_" + std::to_string(count)},
         {"what", "rank 0's lay-out of a file for " + std::to_string(count) + " ranks x " +
                      std::to_string(blobs) + " per-node blobs, in one process"},
         {"layout_ranks", count},
         {"layout_blobs", blobs},
         {"seconds", seconds},
         {"file_bytes", file_bytes},
         {"metadata_bytes", metadata},
         {"metadata_bytes_per_1000_ranks", metadata * 1000.0 / double(count)},
         {"seconds_target", kLayoutSecondsTarget},
         {"metadata_per_1000_ranks_target", kLayoutMetadataPerThousandRanks},
         {"met", seconds <= kLayoutSecondsTarget &&
                     metadata * 1000.0 / double(count) <= kLayoutMetadataPerThousandRanks}});
  }
  return rows;
}

}  // namespace epochrun::cli
