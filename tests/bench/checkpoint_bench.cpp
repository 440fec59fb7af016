// How close a checkpoint save and load come to the disk: `mpiexec -n 3 checkpoint_bench`.
//
// Each repetition times, on every rank at once (barrier before, slowest rank counts):
//   baseline write  every rank pwrites its bytes into one shared file at its own offset,
//                   fsyncs it, and rank 0 renames it and fsyncs the directory: the least any
//                   durable, atomic checkpoint of the same bytes can cost;
//   epochrun save   CheckpointDirectory::save of the same bytes (parallel HDF5 through MPI-IO,
//                   the space reservation, checksums, the integrity seal, fsync, rename, index);
//   baseline read   every rank preads its bytes back;
//   epochrun load   CheckpointDirectory::load (the integrity header, HDF5, every checksum).
// It prints the median of each and the ratio epochrun / baseline: ratios, not absolute
// figures, are what carries from one machine to another. With --cold, rank 0 drops the page
// cache before each read (root only), so reads come from the disk.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "epochrun/epochrun.hpp"
#include "file_descriptor.hpp"  // the library's own RAII descriptor (src/)

namespace {

using namespace epochrun;
namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

struct Settings {
  std::size_t mib_per_rank = 64;
  int repetitions = 5;
  std::string directory = "checkpoint-bench";
  bool cold = false;
};

// Throws Error with errno's text when `ok` is false.
void check(bool ok, const std::string& what) {
  if (!ok) {
    throw Error(what + ": " + std::strerror(errno));
  }
}

// Times `step` on every rank: all start together, the slowest rank's time is returned.
template <typename Step>
double timed(const Communicator& comm, Step step) {
  comm.barrier();
  const auto started = Clock::now();
  step();
  const double mine = std::chrono::duration<double>(Clock::now() - started).count();
  return comm.allreduce_max(mine);
}

void drop_page_cache(const Communicator& comm) {
  comm.barrier();
  if (comm.is_root()) {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  comm.barrier();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The baseline: the same bytes, durably and atomically, with nothing but POSIX calls.
void baseline_write(const Communicator& comm, const std::filesystem::path& directory,
                    std::span<const std::byte> bytes, int repetition) {
  const auto temporary = directory / (".baseline.tmp." + std::to_string(repetition));
  // A new name each time, as each epoch's checkpoint has: replacing a file would add the
  // freeing of the old one's blocks to the baseline.
  const auto target = directory / ("baseline-" + std::to_string(repetition) + ".bin");
  if (comm.is_root()) {
    FileDescriptor created(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    check(created.valid(), "create " + temporary.string());
  }
  comm.barrier();
  FileDescriptor fd(::open(temporary.c_str(), O_WRONLY | O_CLOEXEC));
  check(fd.valid(), "open " + temporary.string());
  const auto offset = static_cast<off_t>(bytes.size()) * comm.rank();
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t written =
        ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done, offset + off_t(done));
    check(written > 0, "write " + temporary.string());
    done += static_cast<std::size_t>(written);
  }
  check(::fsync(fd.get()) == 0, "fsync " + temporary.string());
  comm.barrier();
  if (comm.is_root()) {
    check(::rename(temporary.c_str(), target.c_str()) == 0, "rename " + temporary.string());
    FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    check(dir.valid() && ::fsync(dir.get()) == 0, "fsync " + directory.string());
  }
}

// Into fresh memory, as a restarted process must: a buffer reused across repetitions would
// skip the page faults every real load pays.
void baseline_read(const Communicator& comm, const std::filesystem::path& directory,
                   std::size_t size, int repetition) {
  const auto buffer = std::make_unique_for_overwrite<std::byte[]>(size);
  const std::span<std::byte> bytes(buffer.get(), size);
  const auto file = directory / ("baseline-" + std::to_string(repetition) + ".bin");
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  check(fd.valid(), "open " + file.string());
  const auto offset = static_cast<off_t>(bytes.size()) * comm.rank();
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t got =
        ::pread(fd.get(), bytes.data() + done, bytes.size() - done, offset + off_t(done));
    check(got > 0, "read " + file.string());
    done += static_cast<std::size_t>(got);
  }
}

std::optional<Settings> parse(int argc, char** argv) {
  Settings settings;
  po::options_description options("checkpoint_bench options");
  options.add_options()("help,h", "print this help")(
      "mib-per-rank", po::value(&settings.mib_per_rank)->default_value(settings.mib_per_rank),
      "checkpoint bytes per rank, in MiB")(
      "repetitions", po::value(&settings.repetitions)->default_value(settings.repetitions),
      "repetitions of each measurement (the median is reported)")(
      "directory", po::value(&settings.directory)->default_value(settings.directory),
      "where to write (created; its contents are replaced)")(
      "cold", po::bool_switch(&settings.cold), "drop the page cache before each read (root)");
  po::variables_map values;
  po::store(po::parse_command_line(argc, argv, options), values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << options << "\n";
    return std::nullopt;
  }
  if (settings.mib_per_rank < 1 || settings.repetitions < 1) {
    throw UsageError("--mib-per-rank and --repetitions must be at least 1");
  }
  return settings;
}

int run(const Settings& settings, const Communicator& comm) {
  const std::filesystem::path directory = settings.directory;
  if (comm.is_root()) {
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
  }
  comm.barrier();

  // Incompressible bytes, different on every rank, as trained weights would be.
  const std::size_t bytes_per_rank = settings.mib_per_rank << 20;
  std::vector<std::int64_t> noise(bytes_per_rank / sizeof(std::int64_t));
  std::mt19937_64 random(20261122 + static_cast<std::uint64_t>(comm.rank()));
  std::generate(noise.begin(), noise.end(), [&] { return static_cast<std::int64_t>(random()); });
  Workspace workspace;
  workspace.put("weights", Blob::of(Shape{noise.size()}, std::span<const std::int64_t>(noise)));
  const auto weights = workspace.get("weights").raw();

  CheckpointHeader header;
  header.job = "checkpoint_bench";
  for (int rank = 0; rank < comm.size(); ++rank) {
    header.node_names.push_back(Job::node_name(rank));
  }
  const CheckpointDirectory checkpoints(directory / "checkpoints");

  std::vector<double> write_baseline, save, read_baseline, load;
  for (int repetition = 0; repetition < settings.repetitions; ++repetition) {
    header.epoch = repetition;
    write_baseline.push_back(
        timed(comm, [&] { baseline_write(comm, directory, weights, repetition); }));
    save.push_back(timed(comm, [&] { checkpoints.save(comm, header, workspace, {"weights"}); }));
    if (settings.cold) {
      drop_page_cache(comm);
    }
    read_baseline.push_back(
        timed(comm, [&] { baseline_read(comm, directory, bytes_per_rank, repetition); }));
    if (settings.cold) {
      drop_page_cache(comm);
    }
    Workspace loaded;
    load.push_back(timed(comm, [&] {
      checkpoints.load(comm, CheckpointExpectation{repetition, header.job, header.node_names},
                       loaded);
    }));
    if (!std::equal(weights.begin(), weights.end(), loaded.get("weights").raw().begin())) {
      throw Error("the loaded checkpoint differs from what was saved");
    }
  }

  if (comm.is_root()) {
    const double total_mib = double(settings.mib_per_rank) * comm.size();
    auto row = [&](const char* name, double seconds, double baseline) {
      std::printf("%-16s %9.3f s %9.0f MiB/s   x%.2f of the baseline\n", name, seconds,
                  total_mib / seconds, seconds / baseline);
    };
    std::printf("checkpoint_bench: %d ranks x %zu MiB, %d repetitions (medians), %s reads, in %s\n",
                comm.size(), settings.mib_per_rank, settings.repetitions,
                settings.cold ? "cold" : "page-cache", directory.c_str());
    const double write = median(write_baseline);
    const double read = median(read_baseline);
    row("baseline write", write, write);
    row("epochrun save", median(save), write);
    row("baseline read", read, read);
    row("epochrun load", median(load), read);
    std::filesystem::remove_all(directory);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Settings> settings;
  try {
    settings = parse(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "checkpoint_bench: error: " << error.what() << "\n";
    return 2;
  }
  if (!settings) {
    return 0;
  }
  MpiSession mpi(argc, argv);
  const auto world = Communicator::world();
  configure_logging(world.rank(), spdlog::level::warn);
  try {
    return run(*settings, world);
  } catch (const std::exception& error) {
    std::cerr << "checkpoint_bench: rank " << world.rank() << ": " << error.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 1;
}
