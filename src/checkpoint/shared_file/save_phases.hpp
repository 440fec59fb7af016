// Where one save's time went on this rank, phase by phase, and the page faults it took: the
// breakdown `metrics.jsonl` records per save and `epochrun bench --job` prints, so that a save
// that costs more than the raw write of its bytes says where. Internal to the library.
#pragma once

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace epochrun {

enum class SavePhase : std::size_t {
  kSnapshot,    // asynchronous saves: the blobs copied into the staging buffers, hashed
  kDescribe,    // the temporary name, checking the blobs and agreeing on them
  kLayOut,      // rank 0 creates the file with HDF5, reserves its space, lays it out, seals it
  kWrite,       // this rank's bytes handed to the kernel (pwrite, a collective MPI-IO write)
  kHash,        // xxh64 of a global array's block, after its write
  kFsync,       // waiting for this rank's bytes to reach the disk (fsync, MPI_File_sync)
  kChecksums,   // the checksum table written and made durable
  kCommit,      // rank 0 renames the file to its final name and fsyncs the directory
  kPostCommit,  // the index, retention, the upload's turn
  kWaiting,     // in the agreements after each step: waiting for the slowest rank
  kRedundancy,  // node-local epochs: the copies protected across hosts (--local-redundancy)
  kCount
};

inline constexpr std::array<const char*, static_cast<std::size_t>(SavePhase::kCount)>
    kSavePhaseNames = {"snapshot",  "describe", "lay_out",     "write",   "hash",      "fsync",
                       "checksums", "commit",   "post_commit", "waiting", "redundancy"};

// The process's minor and major page faults so far (getrusage).
struct PageFaults {
  std::uint64_t minor = 0;
  std::uint64_t major = 0;

  static PageFaults now() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return {static_cast<std::uint64_t>(usage.ru_minflt),
            static_cast<std::uint64_t>(usage.ru_majflt)};
  }
  PageFaults operator-(const PageFaults& before) const {
    return {minor - before.minor, major - before.major};
  }
  PageFaults& operator+=(const PageFaults& more) {
    minor += more.minor;
    major += more.major;
    return *this;
  }
};

struct SavePhases {
  std::array<double, static_cast<std::size_t>(SavePhase::kCount)> seconds{};
  PageFaults faults;  // the process's, while the job's thread was in the save

  void add(SavePhase phase, double elapsed) { seconds[static_cast<std::size_t>(phase)] += elapsed; }
  SavePhases& operator+=(const SavePhases& more) {
    for (std::size_t i = 0; i < seconds.size(); ++i) {
      seconds[i] += more.seconds[i];
    }
    faults += more.faults;
    return *this;
  }
};

// Adds the time from its construction to its end to `phase` of `phases`.
class PhaseTimer {
 public:
  PhaseTimer(SavePhases& phases, SavePhase phase) : phases_(phases), phase_(phase) {}
  ~PhaseTimer() { phases_.add(phase_, seconds()); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

 private:
  SavePhases& phases_;
  SavePhase phase_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// Runs `agree` with a step that runs `body`: the body's time goes to `phase`, the rest of what
// `agree` took (the agreement after it, waiting for the slowest rank) to SavePhase::kWaiting.
// `agree` calls the step it is given once, on the ranks that run it.
template <typename Agree, typename Body>
void timed_step(SavePhases& phases, SavePhase phase, Agree&& agree, Body&& body) {
  const auto started = std::chrono::steady_clock::now();
  double in_body = 0;
  agree([&] {
    const PhaseTimer timer(phases, phase);
    body();
    in_body = timer.seconds();
  });
  phases.add(
      SavePhase::kWaiting,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() - in_body);
}

}  // namespace epochrun
