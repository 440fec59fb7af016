// The pieces `epochrun bench` measures with: timed collective steps, alternated rounds,
// incompressible state, the plain-POSIX limits, and the comparison of a measure with its limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "epochrun/communicator.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun::cli {

// Runs `step` on every rank, all starting together; returns the slowest rank's seconds. A
// failure on any rank is raised on every rank, so none is left waiting in the next collective.
double timed(const Communicator& comm, const std::string& what, const std::function<void()>& step);

// Runs `a` then `b` in even rounds, `b` then `a` in odd ones: a disk drains a burst for seconds
// after it, and whatever runs second would otherwise always pay for what ran first.
void alternate(std::int64_t round, const std::function<void()>& a, const std::function<void()>& b);

// `steps` in order in even rounds and in reverse in odd ones (A B C, C B A): whatever runs
// after a burst of writes pays for its draining, so the first and the last trade places.
void in_turn(std::int64_t round, const std::vector<std::function<void()>>& steps);

// `bytes` of incompressible bytes (as trained weights are), different on every rank, in `count`
// u8 blobs named blob_0000000, ... (the last one takes what does not divide evenly). The
// stream does not restart between blobs: split into blobs of a multiple of 8 bytes, they hold
// exactly the bytes of the same state in one blob.
Workspace random_workspace(std::uint64_t bytes, std::int64_t count, int rank);

// How a limit hands its bytes to the kernel.
enum class Writeback {
  kAtFsync,  // pwrite of each blob whole, then fsync: the plain write
  // pwrite in pieces of 8 MiB, each followed by sync_file_range(SYNC_FILE_RANGE_WRITE) of it,
  // then fsync: the disk starts on each piece while the next is copied, the writeback hint a
  // save gives (StreamingWriter), and the fastest way to the disk measured here.
  kHinted,
  // The file's space reserved (fallocate), then each blob in one pwrite with O_DIRECT where its
  // memory and its offset are page-aligned (through the cache otherwise), then fsync: what a
  // save does with a large blob, the page cache left out.
  kDirect,
};

// The write limit: the workspace's blobs one after another into a new file of this rank's own,
// then fsync. Throws Error.
void write_limit(const std::filesystem::path& file, const Workspace& workspace,
                 Writeback writeback = Writeback::kAtFsync);

// The read limit: each blob's bytes into a buffer of its own, freshly allocated (the page
// faults on new memory are part of what any load pays). The buffers are returned so that
// freeing them is not timed.
std::vector<std::unique_ptr<std::byte[]>> read_limit(const std::filesystem::path& file,
                                                     const Workspace& workspace);

// Rank 0 writes back every dirty page and drops the page cache; false where it may not.
bool drop_page_cache(const Communicator& comm);

// Collective, untimed: each rank drops `files` (its own list; a missing one is skipped) from the
// page cache, so that the next read of each comes from the disk. A read measure and its limit
// then read the same medium: a checkpoint written with direct I/O or dropped after its save is
// not in the cache, and a limit file written through it would be.
void drop_files_from_cache(const Communicator& comm,
                           const std::vector<std::filesystem::path>& files);

// One measure's seconds, round by round.
struct Series {
  std::string name;
  std::string what;
  std::vector<double> seconds;
};

// Each round's `measure` time over its `limit` time.
std::vector<double> ratios(const Series& measure, const Series& limit);

// Per-round ratios as a row reports them: ratio (their median), ratio_interval (the median's 95%
// interval, null under 6 rounds), ratio_stable (that interval within +-5% of it) and rounds.
nlohmann::json ratio_figures(const std::vector<double>& ratios);

// `measure` against `limit`, timed in the same rounds: name, what, limit, min/median/max
// seconds, limit_median_seconds, mb_per_second (`bytes` over the median), every round's seconds
// and ratio_figures.
nlohmann::json compare(const Series& measure, const Series& limit, double bytes);

}  // namespace epochrun::cli
