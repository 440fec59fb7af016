#include "shared_directory_check.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "host_name.hpp"
#include "random_token.hpp"

namespace epochrun {
namespace {

constexpr char kProbePrefix[] = ".epochrun.shared-check.";
// A file another client has just created may take a moment to appear on some network file
// systems (a metadata server that lags): a missing probe is looked up again for this long.
constexpr auto kAppearWindow = std::chrono::seconds(3);
constexpr auto kRetryPause = std::chrono::milliseconds(100);

// The contents of `file`, or why they cannot be read (the errno's words).
struct Seen {
  std::optional<std::string> contents;
  int error = 0;
};

Seen read_probe(const std::filesystem::path& file, std::size_t expected_size) {
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    return {std::nullopt, errno};
  }
  std::string contents(expected_size + 1, '\0');
  const ssize_t got = ::pread(fd.get(), contents.data(), contents.size(), 0);
  if (got < 0) {
    return {std::nullopt, errno};
  }
  contents.resize(static_cast<std::size_t>(got));
  return {contents, 0};
}

// Why this rank does not see rank 0's probe; empty when it does.
std::string not_seen_because(const std::filesystem::path& file, const std::string& expected) {
  const auto deadline = std::chrono::steady_clock::now() + kAppearWindow;
  while (true) {
    const auto seen = read_probe(file, expected.size());
    if (seen.contents) {
      return *seen.contents == expected ? "" : "another file has that name here";
    }
    if (seen.error != ENOENT || std::chrono::steady_clock::now() >= deadline) {
      return std::strerror(seen.error);
    }
    std::this_thread::sleep_for(kRetryPause);
  }
}

// "rank 1 on host2: No such file or directory; rank 2 on host3: ..." of the ranks that did not
// see it; empty when all did.
std::string ranks_not_seeing(const std::vector<std::string>& reports) {
  std::string listed;
  for (int rank = 0; rank < static_cast<int>(reports.size()); ++rank) {
    const auto& report = reports[static_cast<std::size_t>(rank)];
    const auto separator = report.find('\n');
    if (separator + 1 == report.size()) {
      continue;  // seen
    }
    listed += (listed.empty() ? "rank " : "; rank ") + std::to_string(rank) + " on " +
              report.substr(0, separator) + ": " + report.substr(separator + 1);
  }
  return listed;
}

// A name check_shared_directory gives its probe: the prefix and a random token, exactly.
bool is_probe_name(const std::string& name) {
  const std::string_view prefix = kProbePrefix;
  return name.size() == prefix.size() + kRandomTokenDigits && name.starts_with(prefix) &&
         std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Rank 0, holding the lock: the probes of a crashed check, and the temporaries of probes it was
// still writing. Left there, they would stay for good (every check picks a new name). One that
// cannot be removed stays: a probe is harmless (no name of a checkpoint).
void remove_stale_probes(const std::filesystem::path& directory) {
  const int removed = remove_own_files(directory, [](const std::string& name) {
    const auto target = temporary_target(name);
    return is_probe_name(target.value_or(name));
  });
  if (removed > 0) {
    spdlog::info("removed {} probe file(s) of an interrupted start-up check", removed);
  }
}

// Rank 0: the probe goes, refused run or not. A probe left behind is harmless (no name of a
// checkpoint), so a failure here is a warning.
void remove_probe(const std::filesystem::path& probe) {
  try {
    if (::unlink(probe.c_str()) != 0) {
      throw Error(errno_message("remove " + probe.string()));
    }
    fsync_directory(probe.parent_path());
  } catch (const std::exception& error) {
    spdlog::warn("shared directory check: {}", error.what());
  }
}

}  // namespace

void check_shared_directory(const Communicator& comm, const std::filesystem::path& directory,
                            std::chrono::duration<double> timeout, bool locked) {
  if (directory.empty()) {
    return;
  }
  if (locked && comm.is_root()) {
    remove_stale_probes(directory);
  }
  if (comm.size() == 1) {
    return;
  }
  const std::string context =
      "check that every rank sees checkpoint directory " + directory.string();
  std::string probe_name = kProbePrefix + random_token();
  std::string expected = "written by rank 0, pid " + std::to_string(::getpid()) + " on " +
                         host_name() + ": " + probe_name;
  // Rank 0 cannot write there at all: nothing to compare. Every save will fail as it does, the
  // job going on (a run with the lock was refused by it already).
  std::string unwritable;
  run_on_root_then_agree_within(comm, context, timeout, [&] {
    try {
      create_private_directories(directory);
      write_file_atomically(directory / probe_name, expected);
    } catch (const std::exception& error) {
      unwritable = error.what();
    }
  });
  comm.broadcast(unwritable);
  if (!unwritable.empty()) {
    spdlog::warn("{}: not checked, rank 0 cannot write there: {}", context, unwritable);
    return;
  }
  comm.broadcast(probe_name);
  comm.broadcast(expected);
  const auto probe = directory / probe_name;
  std::string report;  // "<host>\n<why not seen>", the second line empty when seen
  run_then_agree_within(comm, context, timeout, [&] {
    report = host_name() + "\n" + (comm.is_root() ? "" : not_seen_because(probe, expected));
  });
  const auto not_seeing = ranks_not_seeing(comm.allgather(report));
  if (comm.is_root()) {
    remove_probe(probe);
  }
  if (!not_seeing.empty()) {
    throw CheckpointError("checkpoint directory " + directory.string() +
                          " is not the same directory on every rank: the file rank 0 wrote there "
                          "is not seen by " +
                          not_seeing + "; it must be on a file system that every rank shares");
  }
}

}  // namespace epochrun
