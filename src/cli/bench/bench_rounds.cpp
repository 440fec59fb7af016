#include "bench/bench_rounds.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "bench/median.hpp"
#include "collective_errors.hpp"
#include "direct_io.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "page_cache.hpp"
#include "seconds_since.hpp"

namespace epochrun::cli {
namespace {

void check(bool ok, const std::string& what) {
  if (!ok) {
    throw Error(what + ": " + std::strerror(errno));
  }
}

}  // namespace

double timed(const Communicator& comm, const std::string& what, const std::function<void()>& step) {
  comm.barrier();
  const auto started = std::chrono::steady_clock::now();
  double mine = 0;
  run_then_agree(comm, what, [&] {
    step();
    mine = seconds_since(started);
  });
  return comm.allreduce_max(mine);
}

void alternate(std::int64_t round, const std::function<void()>& a, const std::function<void()>& b) {
  if (round % 2 == 0) {
    a();
    b();
  } else {
    b();
    a();
  }
}

void in_turn(std::int64_t round, const std::vector<std::function<void()>>& steps) {
  if (round % 2 == 0) {
    std::for_each(steps.begin(), steps.end(), [](const auto& step) { step(); });
  } else {
    std::for_each(steps.rbegin(), steps.rend(), [](const auto& step) { step(); });
  }
}

Workspace random_workspace(std::uint64_t bytes, std::int64_t count, int rank) {
  Workspace workspace;
  std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(rank + 1);
  const auto per_blob = bytes / static_cast<std::uint64_t>(count);
  for (std::int64_t i = 0; i < count; ++i) {
    const auto size = i + 1 < count ? per_blob : bytes - per_blob * std::uint64_t(count - 1);
    Blob blob(DType::kU8, Shape{size});
    auto out = blob.raw();
    for (std::size_t at = 0; at < out.size(); at += sizeof(std::uint64_t)) {
      std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);  // SplitMix64
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      std::memcpy(out.data() + at, &z, std::min(sizeof z, out.size() - at));
    }
    char name[32];
    std::snprintf(name, sizeof name, "blob_%07lld", static_cast<long long>(i));
    workspace.put(name, std::move(blob));
  }
  return workspace;
}

void write_limit(const std::filesystem::path& file, const Workspace& workspace,
                 Writeback writeback) {
  constexpr std::size_t kHintedPiece = 8 << 20;
  FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  check(fd.valid(), "create " + file.string());
  FileDescriptor direct_fd(-1);
  if (writeback == Writeback::kDirect) {
    (void)::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, off_t(workspace.byte_size()));
    direct_fd = FileDescriptor(::open(file.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC));
  }
  off_t offset = 0;
  for (const auto& [name, blob] : workspace.blobs()) {
    const auto bytes = blob.raw();
    const std::size_t piece = writeback == Writeback::kHinted ? kHintedPiece : bytes.size();
    const bool aligned = offset % kDirectIoAlignment == 0 &&
                         reinterpret_cast<std::uintptr_t>(bytes.data()) % kDirectIoAlignment == 0;
    const std::size_t direct_bytes =
        direct_fd.valid() && aligned ? bytes.size() / kDirectIoAlignment * kDirectIoAlignment : 0;
    for (std::size_t done = 0; done < bytes.size();) {
      const bool direct = done < direct_bytes;
      const auto length = direct ? direct_bytes - done : std::min(piece, bytes.size() - done);
      const ssize_t written = ::pwrite(direct ? direct_fd.get() : fd.get(), bytes.data() + done,
                                       length, offset + static_cast<off_t>(done));
      check(written > 0, "write " + file.string());
      if (writeback == Writeback::kHinted) {
        (void)::sync_file_range(fd.get(), offset + static_cast<off_t>(done), written,
                                SYNC_FILE_RANGE_WRITE);
      }
      done += static_cast<std::size_t>(written);
    }
    offset += static_cast<off_t>(bytes.size());
  }
  if (direct_fd.valid()) {
    check(::fsync(direct_fd.get()) == 0, "fsync " + file.string());
    direct_fd.close(file.string());
  }
  check(::fsync(fd.get()) == 0, "fsync " + file.string());
  fd.close(file.string());
}

std::vector<std::unique_ptr<std::byte[]>> read_limit(const std::filesystem::path& file,
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

void drop_files_from_cache(const Communicator& comm,
                           const std::vector<std::filesystem::path>& files) {
  run_then_agree(comm, "drop the files' pages", [&] {
    for (const auto& file : files) {
      const FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
      if (fd.valid()) {
        drop_from_page_cache(fd.get(), 0, 0);
      }
    }
  });
}

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

std::vector<double> ratios(const Series& measure, const Series& limit) {
  std::vector<double> each;
  for (std::size_t i = 0; i < measure.seconds.size(); ++i) {
    each.push_back(measure.seconds[i] / limit.seconds[i]);
  }
  return each;
}

nlohmann::json ratio_figures(const std::vector<double>& ratios) {
  const auto interval = median_interval(ratios);
  return {{"ratio", median(ratios)},
          {"ratio_interval",
           interval ? nlohmann::json{interval->first, interval->second} : nlohmann::json(nullptr)},
          {"ratio_stable", median_is_stable(ratios)},
          {"rounds", ratios.size()}};
}

nlohmann::json compare(const Series& measure, const Series& limit, double bytes) {
  const double median_seconds = median(measure.seconds);
  auto row = nlohmann::json{
      {"name", measure.name},
      {"what", measure.what},
      {"limit", limit.name},
      {"median_seconds", median_seconds},
      {"min_seconds", *std::min_element(measure.seconds.begin(), measure.seconds.end())},
      {"max_seconds", *std::max_element(measure.seconds.begin(), measure.seconds.end())},
      {"limit_median_seconds", median(limit.seconds)},
      {"limit_min_seconds", *std::min_element(limit.seconds.begin(), limit.seconds.end())},
      {"limit_max_seconds", *std::max_element(limit.seconds.begin(), limit.seconds.end())},
      {"mb_per_second", bytes / 1e6 / median_seconds},
      {"seconds", measure.seconds}};
  row.update(ratio_figures(ratios(measure, limit)));
  return row;
}

}  // namespace epochrun::cli
