#include "bench/machine_figures.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "bench/median.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "file_system_kind.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kTries = 3;

// Touches one byte of every page of `bytes` of anonymous memory never touched before: each
// touch is a page fault, in which the kernel finds a page and zeroes it.
void first_touch(std::uint64_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw Error(std::string("mmap of fresh memory: ") + std::strerror(errno));
  }
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes_of = static_cast<volatile char*>(memory);
  for (std::uint64_t at = 0; at < bytes; at += page) {
    bytes_of[at] = 1;
  }
  ::munmap(memory, bytes);
}

// `file` (in the page cache: just written) read whole into `into`, memory already touched.
void copy_from_page_cache(const fs::path& file, std::span<std::byte> into) {
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    throw Error("open " + file.string() + ": " + std::strerror(errno));
  }
  for (std::size_t done = 0; done < into.size();) {
    const ssize_t got = ::pread(fd.get(), into.data() + done, into.size() - done, off_t(done));
    if (got <= 0) {
      throw Error("read " + file.string() + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(got);
  }
}

// "always", "madvise" or "never": the bracketed word of the kernel's setting.
std::string transparent_hugepages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(in, text);
  const auto open = text.find('[');
  const auto close = text.find(']');
  return open != std::string::npos && close > open ? text.substr(open + 1, close - open - 1)
                                                   : "unknown";
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = -1;
  in >> one_minute;
  return one_minute;
}

// How many ranks run on rank 0's host (by host name).
int ranks_on_root_host(const Communicator& comm) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  const auto all = comm.allgather(std::string(name));
  return static_cast<int>(std::count(all.begin(), all.end(), all.at(0)));
}

}  // namespace

nlohmann::json measure_machine(const Communicator& comm, const fs::path& directory,
                               std::uint64_t bytes_per_rank) {
  const double load = load_average();
  const double all_bytes = double(bytes_per_rank) * comm.size();
  // Touched memory holding the bytes the writes write and the copy overwrites.
  Workspace state;
  {
    Blob blob(DType::kU8, Shape{bytes_per_rank});
    std::memset(blob.raw().data(), comm.rank() + 1, blob.byte_size());
    state.put("machine", std::move(blob));
  }
  auto into = std::make_unique<std::byte[]>(bytes_per_rank);  // value-initialised: touched
  const auto file = [&](const char* what, int attempt) {
    return directory / (std::string("machine-") + what + "-" + std::to_string(attempt) + "-rank-" +
                        std::to_string(comm.rank()));
  };
  std::vector<double> touch, copy, plain, hinted;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    touch.push_back(timed(comm, "first touch", [&] { first_touch(bytes_per_rank); }));
    alternate(
        attempt,
        [&] {
          plain.push_back(
              timed(comm, "plain write", [&] { write_limit(file("plain", attempt), state); }));
        },
        [&] {
          hinted.push_back(timed(comm, "hinted write", [&] {
            write_limit(file("hinted", attempt), state, Writeback::kHinted);
          }));
        });
    copy.push_back(timed(comm, "page-cache copy", [&] {
      copy_from_page_cache(file("plain", attempt), std::span(into.get(), bytes_per_rank));
    }));
    fs::remove(file("plain", attempt));
    fs::remove(file("hinted", attempt));
  }
  const auto mb_per_second = [&](const std::vector<double>& seconds) {
    return all_bytes / 1e6 / median(seconds);
  };
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int cpus_allowed =
      ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : -1;
  return {
      {"name", "machine"},
      {"what", "what decides the ratios here: fresh memory, page-cache copies, the disk, cores"},
      {"first_touch_mb_per_s", mb_per_second(touch)},
      {"page_cache_copy_mb_per_s", mb_per_second(copy)},
      {"plain_write_mb_per_s", mb_per_second(plain)},
      {"hinted_write_mb_per_s", mb_per_second(hinted)},
      {"bytes_per_rank", bytes_per_rank},
      {"cores", ::sysconf(_SC_NPROCESSORS_ONLN)},
      {"cpus_allowed", cpus_allowed},
      {"ranks", comm.size()},
      {"ranks_on_host", ranks_on_root_host(comm)},
      {"transparent_hugepages", transparent_hugepages()},
      {"file_system", file_system_kind(directory).name},
      {"load_average", load}};
}

void print_machine(const nlohmann::json& machine) {
  std::printf(
      "machine: %lld cores (rank 0 may use %lld) for %lld ranks on this host (%lld in all); "
      "transparent huge pages %s; %s file system; load average %.2f before measuring\n",
      machine["cores"].get<long long>(), machine["cpus_allowed"].get<long long>(),
      machine["ranks_on_host"].get<long long>(), machine["ranks"].get<long long>(),
      machine["transparent_hugepages"].get<std::string>().c_str(),
      machine["file_system"].get<std::string>().c_str(), machine["load_average"].get<double>());
  std::printf(
      "machine, all ranks at once, %.0f MiB each (MB/s, median of 3): first touch of fresh "
      "memory %.0f, page-cache copy into touched memory %.0f, disk write plain (pwrite + fsync) "
      "%.0f, hinted (writeback started every 8 MiB) %.0f\n",
      machine["bytes_per_rank"].get<double>() / (1 << 20),
      machine["first_touch_mb_per_s"].get<double>(),
      machine["page_cache_copy_mb_per_s"].get<double>(),
      machine["plain_write_mb_per_s"].get<double>(),
      machine["hinted_write_mb_per_s"].get<double>());
}

}  // namespace epochrun::cli
