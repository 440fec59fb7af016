// `epochrun bench`: how close a checkpoint save and load come to the disk, measured against
// the limits of the same bytes on the same ranks in the same run.
//
// Each round times, on every rank at once (a barrier before, the slowest rank counts):
//   save         CheckpointDirectory::save (one shared HDF5 file, checksums, seal, fsync,
//                rename, index);
//   write_limit  every rank pwrites the same bytes into a file of its own and fsyncs it: no
//                shared file, no rename, nothing but the data reaching the disk;
//   load         CheckpointDirectory::load (integrity header, HDF5, every checksum);
//   read_limit   every rank preads its bytes into freshly allocated buffers, as a restarted
//                process must.
// Rounds alternate the order, A B then B A: a disk drains a burst for seconds after it, and
// whatever runs second would otherwise always pay for what ran first. Ratios are medians of
// the per-round ratios, so each compares two measures taken seconds apart.
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command_line.hpp"
#include "cli/median.hpp"
#include "collective_errors.hpp"
#include "epochrun/epochrun.hpp"
#include "file_descriptor.hpp"
#include "json_text.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  double mib_per_rank = 256;
  std::int64_t blobs = 1;
  std::int64_t rounds = 5;
  std::string directory = "epochrun-bench";
  bool cold = false;
  std::string json_file;
};

std::optional<BenchOptions> parse_bench_options(int argc, char** argv) {
  BenchOptions o;
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
                         "also write the results to this JSON file");
  po::variables_map values;
  po::store(po::command_line_parser(argc, argv).options(options).run(), values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << options << "\n";
    return std::nullopt;
  }
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
  return o;
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    throw Error(what + ": " + std::strerror(errno));
  }
}

// Runs `step` on every rank, all starting together; returns the slowest rank's seconds. A
// failure on any rank is raised on every rank, so none is left waiting in the next collective.
template <typename Step>
double timed(const Communicator& comm, const std::string& what, Step step) {
  comm.barrier();
  const auto started = Clock::now();
  double mine = 0;
  run_then_agree(comm, what, [&] {
    step();
    mine = std::chrono::duration<double>(Clock::now() - started).count();
  });
  return comm.allreduce_max(mine);
}

// Incompressible bytes, different on every rank, as trained weights are: SplitMix64.
std::vector<Blob> random_blobs(std::uint64_t bytes, std::int64_t count, int rank) {
  std::vector<Blob> blobs;
  std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(rank + 1);
  const auto per_blob = bytes / static_cast<std::uint64_t>(count);
  for (std::int64_t i = 0; i < count; ++i) {
    // The last blob takes what does not divide evenly.
    const auto size = i + 1 < count ? per_blob : bytes - per_blob * std::uint64_t(count - 1);
    Blob blob(DType::kU8, Shape{size});
    auto out = blob.raw();
    for (std::size_t at = 0; at < out.size(); at += sizeof(std::uint64_t)) {
      std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      std::memcpy(out.data() + at, &z, std::min(sizeof z, out.size() - at));
    }
    blobs.push_back(std::move(blob));
  }
  return blobs;
}

// The write limit: this rank's blobs one after another into a new file of its own, then fsync.
void write_limit(const fs::path& file, const Workspace& workspace) {
  FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  check(fd.valid(), "create " + file.string());
  off_t offset = 0;
  for (const auto& [name, blob] : workspace.blobs()) {
    const auto bytes = blob.raw();
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t written = ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done,
                                       offset + static_cast<off_t>(done));
      check(written > 0, "write " + file.string());
      done += static_cast<std::size_t>(written);
    }
    offset += static_cast<off_t>(bytes.size());
  }
  check(::fsync(fd.get()) == 0, "fsync " + file.string());
  fd.close(file.string());
}

// The read limit: each blob's bytes into a buffer of its own, freshly allocated (the page
// faults on new memory are part of what any load pays). The buffers are returned so that
// freeing them is not timed.
std::vector<std::unique_ptr<std::byte[]>> read_limit(const fs::path& file,
                                                     const Workspace& workspace) {
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  check(fd.valid(), "open " + file.string());
  std::vector<std::unique_ptr<std::byte[]>> buffers;
  off_t offset = 0;
  for (const auto& [name, blob] : workspace.blobs()) {
    const auto size = blob.byte_size();
    buffers.push_back(std::make_unique_for_overwrite<std::byte[]>(size));
    for (std::size_t done = 0; done < size;) {
      const ssize_t got =
          ::pread(fd.get(), buffers.back().get() + done, size - done, offset + off_t(done));
      check(got > 0, "read " + file.string());
      done += static_cast<std::size_t>(got);
    }
    offset += static_cast<off_t>(size);
  }
  return buffers;
}

// Rank 0 writes back every dirty page and drops the page cache; false where it may not.
bool drop_page_cache(const Communicator& comm) {
  std::int64_t dropped = 0;
  if (comm.is_root()) {
    ::sync();
    std::ofstream control("/proc/sys/vm/drop_caches");
    control << "3\n";
    control.flush();
    dropped = control.good() ? 1 : 0;
  }
  comm.broadcast(dropped);
  return dropped == 1;
}

struct Series {
  std::string name;
  std::string what;
  std::vector<double> seconds;
};

struct Row {
  const Series& measure;
  const Series& limit;
  nlohmann::json to_json(const BenchOptions& options, int ranks, double total_bytes,
                         bool cold) const {
    std::vector<double> ratios;
    for (std::size_t i = 0; i < measure.seconds.size(); ++i) {
      ratios.push_back(measure.seconds[i] / limit.seconds[i]);
    }
    const double median_seconds = median(measure.seconds);
    return {{"name", measure.name},
            {"what", measure.what},
            {"limit", limit.name},
            {"median_seconds", median_seconds},
            {"min_seconds", *std::min_element(measure.seconds.begin(), measure.seconds.end())},
            {"max_seconds", *std::max_element(measure.seconds.begin(), measure.seconds.end())},
            {"limit_median_seconds", median(limit.seconds)},
            {"ratio", median(ratios)},
            {"mb_per_second", total_bytes / 1e6 / median_seconds},
            {"seconds", measure.seconds},
            {"ranks", ranks},
            {"mib_per_rank", options.mib_per_rank},
            {"blobs", options.blobs},
            {"rounds", options.rounds},
            {"cold", cold}};
  }
};

void print_table(const nlohmann::json& rows, const BenchOptions& options, int ranks, bool cold,
                 const fs::path& directory) {
  std::printf(
      "epochrun bench: %d ranks x %g MiB in %lld blob(s) each, %lld rounds (A B, B A, ...), "
      "%s reads, in %s\n",
      ranks, options.mib_per_rank, static_cast<long long>(options.blobs),
      static_cast<long long>(options.rounds), cold ? "cold" : "page-cache", directory.c_str());
  std::printf("%-12s %-12s %9s %9s %9s %9s %7s\n", "measure", "limit", "MB/s", "min s", "median s",
              "max s", "ratio");
  for (const auto& row : rows) {
    std::printf("%-12s %-12s %9.0f %9.4f %9.4f %9.4f %7.3f\n",
                row["name"].get<std::string>().c_str(), row["limit"].get<std::string>().c_str(),
                row["mb_per_second"].get<double>(), row["min_seconds"].get<double>(),
                row["median_seconds"].get<double>(), row["max_seconds"].get<double>(),
                row["ratio"].get<double>());
  }
  std::printf(
      "ratio: median over the rounds of measure / limit, each pair timed in the same "
      "round\n");
  for (const auto& row : rows) {
    std::printf("  %-12s %s\n", row["name"].get<std::string>().c_str(),
                row["what"].get<std::string>().c_str());
  }
  std::fflush(stdout);
}

// Rank 0: the working directory must be new or empty, since all of it is removed at the end.
void prepare_directory(const fs::path& directory) {
  std::error_code error;
  if (fs::exists(directory, error) &&
      (!fs::is_directory(directory, error) || !fs::is_empty(directory, error))) {
    throw UsageError("--dir " + directory.string() +
                     " exists and is not an empty directory; bench removes its directory at the "
                     "end, so give it a new one");
  }
  fs::create_directories(directory / "checkpoints", error);
  if (!error) {
    fs::create_directories(directory / "plain", error);
  }
  if (error) {
    throw UsageError("cannot create " + directory.string() + ": " + error.message());
  }
}

nlohmann::json measure(const BenchOptions& options, const Communicator& comm,
                       const fs::path& directory, bool& cold) {
  const auto bytes_per_rank =
      static_cast<std::uint64_t>(std::llround(options.mib_per_rank * (1 << 20)));
  Workspace workspace;
  {
    auto blobs = random_blobs(bytes_per_rank, options.blobs, comm.rank());
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "blob_%07zu", i);
      workspace.put(name, std::move(blobs[i]));
    }
  }
  CheckpointHeader header;
  header.job = "bench";
  for (int rank = 0; rank < comm.size(); ++rank) {
    header.node_names.push_back(Job::node_name(rank));
  }
  const CheckpointDirectory checkpoints(directory / "checkpoints");
  const auto names = workspace.names();

  Series save{"save", "CheckpointDirectory::save: one shared HDF5 file, committed", {}};
  Series write{"write_limit", "pwrite + fsync of the same bytes, one file per rank", {}};
  Series load{"load", "CheckpointDirectory::load, every checksum verified", {}};
  Series read{"read_limit", "pread of the same bytes into freshly allocated buffers", {}};
  auto before_read = [&] {
    if (cold && !drop_page_cache(comm)) {
      cold = false;
      if (comm.is_root()) {
        print_error(
            "--cold: cannot drop the page cache (needs root and a writable "
            "/proc/sys/vm/drop_caches); reads may come from memory");
      }
    }
  };
  for (std::int64_t round = 0; round < options.rounds; ++round) {
    header.epoch = round;
    const auto plain =
        directory / "plain" /
        ("round-" + std::to_string(round) + "-rank-" + std::to_string(comm.rank()) + ".bin");
    const bool limit_first = round % 2 == 1;
    auto time_save = [&] {
      save.seconds.push_back(
          timed(comm, "save", [&] { checkpoints.save(comm, header, workspace, names); }));
    };
    auto time_write = [&] {
      write.seconds.push_back(timed(comm, "write_limit", [&] { write_limit(plain, workspace); }));
    };
    bool same = false;
    auto time_load = [&] {
      before_read();
      Workspace loaded;
      load.seconds.push_back(timed(comm, "load", [&] {
        checkpoints.load(comm, CheckpointExpectation{round, header.job, header.node_names}, loaded);
      }));
      same = loaded.blobs() == workspace.blobs();
    };
    auto time_read = [&] {
      before_read();
      std::vector<std::unique_ptr<std::byte[]>> buffers;
      read.seconds.push_back(
          timed(comm, "read_limit", [&] { buffers = read_limit(plain, workspace); }));
    };
    if (limit_first) {
      time_write();
      time_save();
      time_read();
      time_load();
    } else {
      time_save();
      time_write();
      time_load();
      time_read();
    }
    // What was measured must be what was saved, or the figures mean nothing.
    run_then_agree(comm, "round " + std::to_string(round), [&] {
      if (!same) {
        throw Error("the loaded checkpoint differs from what was saved");
      }
      // Each round's files go before the next, so that no round measures a fuller directory.
      fs::remove(plain);
    });
    run_on_root_then_agree(comm, "round " + std::to_string(round),
                           [&] { checkpoints.remove({round}); });
  }
  const double total_bytes = double(bytes_per_rank) * comm.size();
  auto rows = nlohmann::json::array();
  for (const auto& row : {Row{save, write}, Row{load, read}, Row{write, write}, Row{read, read}}) {
    rows.push_back(row.to_json(options, comm.size(), total_bytes, cold));
  }
  return rows;
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
    return 0;
  }

  // A restarted process reads its checkpoint into memory it has never touched. glibc would
  // instead serve a buffer freed in the previous round from its heap, already faulted in (its
  // mmap threshold grows with every large free, up to 32 MiB), and flatter both reads below
  // that size. A fixed threshold gives every large buffer, the loads' and the limit's, new
  // pages each round.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  MpiSession mpi(argc, argv);
  const auto world = Communicator::world();
  configure_logging(world.rank(), spdlog::level::warn);
  const fs::path directory = options->directory;
  // Opened before anything is measured: a typo in --json must not cost minutes of rounds.
  std::ofstream json_out;
  try {
    run_on_root_then_agree(world, "bench", [&] {
      prepare_directory(directory);
      if (!options->json_file.empty()) {
        json_out.open(options->json_file);
        if (!json_out) {
          const std::string reason = std::strerror(errno);
          fs::remove_all(directory);  // new or empty a moment ago
          throw UsageError("cannot write --json " + options->json_file + ": " + reason);
        }
      }
    });
  } catch (const std::exception& error) {
    print_error(error.what());  // and the directory, not ours, is left alone
    return static_cast<int>(exit_code_for(error));
  }
  int status = 0;
  try {
    bool cold = options->cold;
    const auto rows = measure(*options, world, directory, cold);
    if (world.is_root()) {
      print_table(rows, *options, world.size(), cold, directory);
      if (json_out.is_open()) {
        json_out << json_text(rows, 2) << "\n";
        json_out.close();
        if (!json_out) {
          throw Error("cannot write " + options->json_file);
        }
      }
    }
  } catch (const std::exception& error) {
    print_error(error.what());
    status = static_cast<int>(exit_code_for(error));
  }
  world.barrier();
  if (world.is_root()) {
    std::error_code ignored;
    fs::remove_all(directory, ignored);
  }
  return status;
}

}  // namespace epochrun::cli
