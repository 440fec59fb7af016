// A rank's node-local copy of one epoch's checkpoint (--local-dir), as SCR and VeloC keep one:
// the save writes what the rank saves there first, the job goes on, and the shared checkpoint
// file is written from the copy in the background (checkpoint_saver); a resume on the same
// ranks and hosts may load the copy instead of the shared file, once every byte of it is
// verified against the checksums the committed shared file records. Internal to the library.
//
// The file, DIR/epoch-NNNNNN.rank-R.local: each value at an offset aligned to 4096 bytes (so
// that the flush may write it with direct I/O straight from a read-only mapping), then a JSON
// record (job, epoch, rank, ranks, host, and per blob: name, kind, dtype, shape, offset, bytes,
// xxh64), its length and a magic. It is written under a temporary name and renamed, but not
// fsynced: it is a cache whose every byte is verified before it is used (a copy lost or torn in
// a crash of its host is found so, and the shared file loaded instead); the shared checkpoint
// is the durable one.
//
// DIR/spare.rank-R.local: a copy that retention retired (remove_local_copies), kept so that the
// rank's next copy is written over it instead of into a new file. A new file's pages (tmpfs) or
// blocks (a disk) are allocated as it is written: on tmpfs here a raw write of 256 MiB into a
// new file took 1.8 to 4.1 times one over an existing file (docs/benchmarks.md). PostgreSQL
// recycles its WAL segments for the same reason. It costs what the save's peak costs anyway: one
// copy more than --local-keep, at rest as well as during a save; the level deletes it when its
// run ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "epochrun/blob.hpp"
#include "pending_checkpoint_v3.hpp"

namespace epochrun {

struct LocalCopyBlob {
  std::string name;
  StorageKind kind = StorageKind::kPerNode;
  DType dtype = DType::kU8;
  Shape shape;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t xxh64 = 0;  // of the bytes as the job held them when the copy was written
};

// Who wrote a copy, and what it holds.
struct LocalCopyRecord {
  std::string job;
  std::int64_t epoch = 0;
  int rank = 0;
  int ranks = 0;
  std::string host;
  std::vector<LocalCopyBlob> blobs;
};

// DIR/epoch-NNNNNN.rank-R.local
std::filesystem::path local_copy_file(const std::filesystem::path& dir, std::int64_t epoch,
                                      int rank);
// The epoch and rank of a name DIR/epoch-NNNNNN.rank-R`suffix` (".local" for a copy, the
// redundancy files' suffixes in local_redundancy_file.hpp); nullopt for any other name.
std::optional<std::pair<std::int64_t, int>> parse_epoch_rank_name(std::string_view name,
                                                                  std::string_view suffix);

// Writes this rank's `blobs` (views of the job's memory) as its copy of `epoch`, hashing each
// value as it streams, and returns what it wrote: over the rank's spare when there is one that
// is a regular file of this user's with no other name (anything else under the spare's name is
// deleted, a directory left alone, and a new file made).
// Throws Error (no file left behind).
LocalCopyRecord write_local_copy(const std::filesystem::path& dir, const std::string& job,
                                 std::int64_t epoch, int rank, int ranks,
                                 const std::vector<SavedBlob>& blobs);

// A copy mapped read-only, from which the flush writes the shared file.
class MappedLocalCopy {
 public:
  // CheckpointNotFound when the file is missing, CorruptCheckpoint when it is not a whole copy.
  static MappedLocalCopy open(const std::filesystem::path& file);
  ~MappedLocalCopy();
  MappedLocalCopy(MappedLocalCopy&& other) noexcept;
  MappedLocalCopy& operator=(MappedLocalCopy&&) = delete;
  MappedLocalCopy(const MappedLocalCopy&) = delete;
  MappedLocalCopy& operator=(const MappedLocalCopy&) = delete;

  const LocalCopyRecord& record() const { return record_; }
  // `saved` (what the copy was written from) with their bytes from the mapping: each view's
  // hash unset and its expected hash the record's, so that the flush hashes what it reads and
  // fails when the copy no longer holds what the job saved.
  std::vector<SavedBlob> flushed(std::vector<SavedBlob> saved) const;

 private:
  MappedLocalCopy(const std::byte* data, std::size_t size, LocalCopyRecord record)
      : data_(data), size_(size), record_(std::move(record)) {}
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  LocalCopyRecord record_;
};

// Reads the record of the copy open as `fd` (`what` names it). CorruptCheckpoint when the file
// is not a whole copy.
LocalCopyRecord read_local_copy_record(int fd, const std::string& what);

// The xxh64 of `record` as a copy stores it (the JSON text before the copy's tail): what a
// node-local epoch's manifest records of each rank's copy (local_manifest.hpp).
std::uint64_t local_copy_record_xxh64(const LocalCopyRecord& record);

// DIR/spare.rank-R.local
std::filesystem::path local_spare_file(const std::filesystem::path& dir, int rank);

// What becomes of the oldest copy remove_local_copies deletes: kept as the rank's spare (a
// level that goes on saving), or deleted with the spare (a level that ends or fails).
enum class SpareCopy { kKeep, kDelete };

// Deletes this rank's copies of every epoch but those in `keep`, and what an interrupted write
// of its copies left; with SpareCopy::kKeep, the oldest copy it deletes becomes the rank's spare
// instead (renamed over any spare before it), with kDelete the spare goes too. The copies and
// spares of ranks from `ranks` up (the run's rank count: those of a run before it on more
// ranks) are deleted as this rank's are, the spares whatever `spare` says. Only those ranks'
// names, regular files or not, never through a symlink (unlink, rename). Returns how many failed
// to go (a warning, never an error).
int remove_local_copies(const std::filesystem::path& dir, int rank, int ranks,
                        const std::vector<std::int64_t>& keep, SpareCopy spare);

// Creates `dir` when it is missing (as --checkpoint-dir is created), then UsageError with one
// line unless it is a directory this process can create a file in (its probe,
// DIR/.probe.local.tmp.<pid>.<random>, created and removed), and not the checkpoint directory
// itself. Creates nothing when `dir` names the checkpoint directory, which need not exist yet.
void check_local_directory(const std::filesystem::path& dir,
                           const std::filesystem::path& checkpoint_dir);

// Deletes the probes check_local_directory's of a crashed process left in `dir`: only names of
// exactly that pattern, only regular files, never through a symlink (remove_own_files). For a run
// that holds the checkpoint directory's lock, once every rank's own check is done: a probe left
// then is no check of this run, and one a run sharing `dir` (against the advice) is making that
// instant only loses its name early, which its check does not mind. Returns how many.
int remove_stale_local_probes(const std::filesystem::path& dir);

}  // namespace epochrun
