#include "bench/local_level_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "bench/step_series.hpp"
#include "blob_view.hpp"
#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "file_descriptor.hpp"
#include "local_level.hpp"
#include "mapped_store.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

// The file a raw write goes into: `file` itself when it is there (the round before last's,
// written over as the level writes a copy over its spare), a new one otherwise.
FileDescriptor open_to_write(const fs::path& file) {
  return fs::exists(file) ? open_regular_file_for_writing(file) : create_new_file(file);
}

// The raw write a node-local copy is measured against: the same bytes, one value after another
// (not fsynced, as the copy is not).
void raw_write(const fs::path& file, const Workspace& workspace) {
  auto fd = open_to_write(file);
  std::uint64_t offset = 0;
  for (const auto& name : workspace.names()) {
    const auto bytes = workspace.get(name).raw();
    write_at(fd.get(), offset, bytes, file.string());
    offset += bytes.size();
  }
  fd.close(file.string());
}

// One value of a raw write that hashes as a copy must: each 1 MiB piece hashed (xxh64) while it
// is still in the cache, before its write (pieces of 16 KiB to 4 MiB did no better here).
void hashed_write_at(int fd, std::uint64_t offset, std::span<const std::byte> bytes,
                     const fs::path& file) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
    const auto piece = bytes.subspan(at, std::min(kPiece, bytes.size() - at));
    XXH64_update(state.get(), piece.data(), piece.size());
    write_at(fd, offset + at, piece, file.string());
  }
  (void)XXH64_digest(state.get());  // the library's call: not optimised away
}

// The floor of a copy that carries its checksum, as a plain program writes it: the raw write,
// each value hashed as it goes (hashed_write_at).
void hashed_write(const fs::path& file, const Workspace& workspace) {
  auto fd = open_to_write(file);
  std::uint64_t offset = 0;
  for (const auto& name : workspace.names()) {
    const auto bytes = workspace.get(name).raw();
    hashed_write_at(fd.get(), offset, bytes, file);
    offset += bytes.size();
  }
  fd.close(file.string());
}

// The save's own way on tmpfs (mapped_store.hpp) alone: each value the store takes stored
// through a mapping of the file of the round before last, as a copy over its spare; the others,
// and every value while there is no such file yet (the first two rounds, as the save's first
// copies), by the hashed write.
void mapped_write(const fs::path& file, const Workspace& workspace) {
  const bool over_a_file = fs::exists(file);
  auto fd = over_a_file ? open_regular_file_for_writing(file, WriteAccess::kAlsoRead)
                        : create_new_file(file);
  MappedStore store(fd.get(), file.string());
  std::uint64_t offset = 0;
  for (const auto& view : blob_views(workspace, workspace.names())) {
    if (store.takes(offset, view.bytes.size())) {
      (void)store.store(offset, view);
    } else {
      hashed_write_at(fd.get(), offset, view.bytes, file);
    }
    offset += view.bytes.size();
  }
  fd.close(file.string());
}

// The bytes of every regular file below `directory` (rank 0's view, on every rank).
double bytes_below(const Communicator& comm, const fs::path& directory) {
  double bytes = 0;
  if (comm.is_root()) {
    std::error_code error;
    for (const auto& entry : fs::recursive_directory_iterator(directory, error)) {
      if (entry.is_regular_file(error)) {
        bytes += double(entry.file_size(error));
      }
    }
  }
  comm.broadcast(bytes);
  return bytes;
}

nlohmann::json save_rows(const Communicator& comm, const fs::path& directory,
                         const fs::path& local_dir, std::uint64_t bytes_per_rank,
                         std::int64_t blobs, MeasureSettings& settings) {
  const auto workspace = random_workspace(bytes_per_rank, blobs, comm.rank());
  CheckpointOptions options;
  options.checkpoint_dir = directory / "levels";
  options.local_dir = local_dir;
  run_then_agree(comm, "bench --local-dir", [&] {
    create_private_directories(local_dir);
    if (comm.is_root()) {
      create_private_directories(options.checkpoint_dir);
    }
  });
  LocalLevel level("bench", comm, options);
  std::vector<SavedBlob> saved;
  for (auto& view : blob_views(workspace, workspace.names())) {
    saved.push_back(SavedBlob{std::move(view), StorageKind::kPerNode, {}, nullptr});
  }
  Series save{"local_save",
              "the node-local save: every rank's copy into --local-dir, agreed, and rank 0's "
              "manifest in --dir",
              {}};
  Series limit{"local_write_limit",
               "pwrite of the same bytes per rank there, over the file of the round before last",
               {}};
  Series hashed{"local_hashed_write",
                "the same pwrite, each 1 MiB piece hashed (xxh64) before its write: a copy "
                "carrying its checksum, written the plain way",
                {}};
  Series new_file{"local_new_file_write",
                  "the same pwrite into a new file: what the level's spare saves a copy",
                  {}};
  Series mapped{"local_mapped_write",
                "the same bytes stored through a mapping (the save's way on tmpfs), each 64 KiB "
                "piece hashed (xxh64) before its store",
                {}};
  // Only where the save stores through a mapping: elsewhere the hashed write is its way.
  const bool mapping = MappedStore::suits(local_dir);
  const auto raw_file = [&](const std::string& kind, std::int64_t round) {
    return local_dir /
           (kind + "-" + std::to_string(round % 2) + "-rank-" + std::to_string(comm.rank()));
  };
  // Each side keeps its files as the level keeps its copies with --local-keep 1: the former
  // round's file is there while the next is written, and the one before it is written over,
  // as a copy is over the spare the level kept of it. The new file's former file goes after
  // its write, untimed. (Deleted at once after its write, a raw file's dirty pages were dropped
  // unwritten while the copies' were written back; deleted just before it, its next write
  // reused the pages just freed where the save's took pages the kernel had held free for a
  // round: on a virtual machine whose host takes free memory back, a fault in the host each.)
  const auto timed_write = [&](Series& series, const std::string& kind, std::int64_t round,
                               auto write) {
    series.seconds.push_back(
        timed(comm, series.name, [&] { write(raw_file(kind, round), workspace); }));
  };
  // Rank 0's steps of each save (step_times.hpp): the copy, the agreements, the manifest.
  StepSeries save_steps;
  step_times::record_on_this_thread(comm.is_root());
  for (std::int64_t round = 0;; ++round) {
    in_turn(round, {[&] {
                      SavePhases phases;
                      step_times::take();
                      save.seconds.push_back(timed(comm, save.name, [&] {
                        if (!level.save(round, saved, phases)) {
                          throw Error("the node-local save failed (see the warning)");
                        }
                      }));
                      save_steps.add(step_times::take());
                      level.retain();
                    },
                    [&] { timed_write(hashed, "hashed", round, hashed_write); },
                    [&] {
                      if (mapping) {
                        timed_write(mapped, "mapped", round, mapped_write);
                      }
                    },
                    [&] { timed_write(limit, "raw", round, raw_write); },
                    [&] {
                      const auto file = raw_file("new", round);
                      fs::remove(file);  // from the round before last
                      timed_write(new_file, "new", round, raw_write);
                      fs::remove(raw_file("new", round + 1));
                    }});
    if (last_round(settings, round, {ratios(save, limit)})) {
      break;
    }
  }
  step_times::record_on_this_thread(false);
  level.delete_all();
  for (const auto* kind : {"raw", "hashed", "new", "mapped"}) {
    fs::remove(raw_file(kind, 0));
    fs::remove(raw_file(kind, 1));
  }
  const double bytes = comm.allreduce(double(workspace.byte_size()), Reduction::kSum);
  auto rows = nlohmann::json::array();
  rows.push_back(with_target(compare(save, limit, bytes), kLocalSaveTarget));
  auto over_hashed = compare(save, hashed, bytes);
  over_hashed["name"] = save.name + "_over_hashed_write";
  rows.push_back(std::move(over_hashed));
  rows.push_back(compare(hashed, limit, bytes));
  rows.push_back(compare(new_file, limit, bytes));
  rows.push_back(compare(limit, limit, bytes));
  if (mapping) {
    auto over_mapped = compare(save, mapped, bytes);
    over_mapped["name"] = save.name + "_over_mapped_write";
    rows.push_back(std::move(over_mapped));
    rows.push_back(compare(mapped, hashed, bytes));
  }
  rows.push_back({{"name", "local_save_steps"},
                  {"what", "rank 0's median seconds per step of the node-local save"},
                  {"steps", save_steps.medians()}});
  return rows;
}

// The job run with `flush_every`, into fresh directories; returns its seconds and sets
// `shared_bytes` to what it left in the checkpoint directory.
double job_run(const Communicator& comm, const fs::path& directory, const fs::path& local_dir,
               const JobBenchOptions& job, std::int64_t flush_every, const std::string& label,
               double& shared_bytes) {
  auto invocation =
      job_invocation(job, {"--checkpoint-dir", (directory / label).string(), "--local-dir",
                           (local_dir / label).string(), "--flush-every",
                           std::to_string(flush_every), "--local-keep", "1000000000"});
  Workspace workspace;
  RunSummary summary;
  const double seconds = timed(comm, label, [&] {
    JobRunner runner(invocation.make_job(), comm, invocation.run_options);
    summary = runner.run(workspace);
  });
  if (!summary.failed_saves.empty()) {
    throw Error("bench --local-dir: the save of epoch " +
                std::to_string(summary.failed_saves.front().epoch) +
                " failed: " + summary.failed_saves.front().error);
  }
  shared_bytes = bytes_below(comm, directory / label);
  run_then_agree(comm, "remove " + label, [&] {
    std::error_code ignored;
    fs::remove_all(local_dir / label, ignored);
    if (comm.is_root()) {
      fs::remove_all(directory / label, ignored);
    }
  });
  return seconds;
}

nlohmann::json job_rows(const Communicator& comm, const fs::path& directory,
                        const fs::path& local_dir, const JobBenchOptions& job,
                        MeasureSettings& settings) {
  Series levels{"job_flush_every_10_run",
                "the job with --local-dir --flush-every 10: every checkpoint node-local, every "
                "10th flushed",
                {}};
  Series every{"job_flush_every_1_run", "the job with --local-dir, every checkpoint flushed", {}};
  double levels_bytes = 0;
  double every_bytes = 0;
  for (std::int64_t round = 0;; ++round) {
    const auto suffix = "-" + std::to_string(round);
    alternate(
        round,
        [&] {
          levels.seconds.push_back(
              job_run(comm, directory, local_dir, job, 10, "levels" + suffix, levels_bytes));
        },
        [&] {
          every.seconds.push_back(
              job_run(comm, directory, local_dir, job, 1, "every" + suffix, every_bytes));
        });
    if (last_round(settings, round, {ratios(levels, every)})) {
      break;
    }
  }
  auto row = compare(levels, every, 0);
  row.erase("mb_per_second");
  row["job"] = job.job;
  row["epochs"] = job.epochs;
  row["job_options"] = job.job_arguments;
  row["shared_bytes"] = levels_bytes;
  row["limit_shared_bytes"] = every_bytes;
  row["shared_bytes_ratio"] = every_bytes > 0 ? levels_bytes / every_bytes : 0.0;
  return nlohmann::json::array({row});
}

}  // namespace

nlohmann::json measure_local_levels(const Communicator& comm, const fs::path& directory,
                                    const fs::path& local_dir, std::uint64_t bytes_per_rank,
                                    std::int64_t blobs, const JobBenchOptions& job,
                                    MeasureSettings& settings) {
  auto rows = save_rows(comm, directory, local_dir, bytes_per_rank, blobs, settings);
  if (!job.job.empty()) {
    for (auto& row : job_rows(comm, directory, local_dir, job, settings)) {
      rows.push_back(std::move(row));
    }
  }
  comm.barrier();
  std::error_code ignored;
  fs::remove(local_dir, ignored);  // only when empty: what the bench made there is gone
  return rows;
}

}  // namespace epochrun::cli
