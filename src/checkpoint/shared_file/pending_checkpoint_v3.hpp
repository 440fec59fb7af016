// One version 3 checkpoint file being saved (docs/FORMAT.md, "Format version 3"), in steps like
// PendingCheckpoint's, with a fixed cost that does not grow with ranks x blobs: the ranks agree
// on their blobs by reductions and a prefix sum, rank 0 lays the file out from one description
// per blob name, and every rank computes where its bytes go from a few broadcast offsets.
// Internal to the library; every save writes this version.
//
//   begin         collective, main thread: agree, lay out and seal (rank 0), broadcast the
//                 offsets with the lay-out's outcome;
//   write_data    this rank alone, any thread, no MPI call: per-node, ragged and (rank 0)
//                 replicated bytes with pwrite, checksummed as they stream, its index rows, and
//                 its block of each global array written directly (array_path.hpp);
//   write_arrays  collective, one thread per rank (the main thread, or the background thread
//                 of an asynchronous save at MPI_THREAD_MULTIPLE): each global array that takes
//                 the MPI-IO path with one collective write, each rank's block hashed, then
//                 everything made durable; nothing at all when every array was written directly;
//   finish        collective, the same thread: agree on every rank's writes; the file is then
//                 complete and durable, ready for the commit (a rename).
#pragma once

#include <chrono>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "array_path.hpp"
#include "blob_view.hpp"
#include "checkpoint_layout_v3.hpp"
#include "epochrun/communicator.hpp"
#include "mpi_io_file.hpp"
#include "save_phases.hpp"
#include "streaming_writer.hpp"
#include "unsealed_file.hpp"

namespace epochrun {

// One blob this rank saves. For a global array, `view.shape` is this rank's block's count.
struct SavedBlob {
  BlobView view;
  // kPerNode (uniform or ragged: the ranks decide together), kReplicated or kGlobalArray.
  StorageKind kind = StorageKind::kPerNode;
  // Global array: its global shape and every rank's block (index = rank), the same on every
  // rank and checked to tile the array (check_tiling) when it was declared.
  Shape global_shape;
  std::shared_ptr<const std::vector<Block>> blocks;
};

// The root attributes of the file.
struct SavedFile {
  std::int64_t epoch = 0;
  std::string job;
  std::vector<std::string> node_names;  // index = rank
  std::string config_json;
};

class PendingCheckpointV3 {
 public:
  // Collective: see the header comment. A failure on any rank throws on every rank (rank 0 then
  // removes the file it created); each agreement is bounded by `timeout`.
  // `arrays` says how global arrays are written: which path (rank 0 decides each array's from
  // the blocks and the file system it created the file on, and broadcasts it with the layout)
  // and the collective writes' hints. With `check_replicated`, the ranks also
  // compare the checksums of their replicated blobs, and a save where they differ fails naming
  // the blobs (a debugging aid: it costs hashing every replicated blob on every rank).
  // With FileName::kTemporarySibling, the file is a fresh temporary sibling of `file` that rank
  // 0 names as it creates it (temporary_sibling, durable_file.hpp) and sends with the layout;
  // file() is then that name on every rank.
  enum class FileName { kAsGiven, kTemporarySibling };
  static PendingCheckpointV3 begin(const std::filesystem::path& file, const Communicator& comm,
                                   SavedFile root, std::vector<SavedBlob> blobs,
                                   std::chrono::duration<double> timeout,
                                   ArrayIoOptions arrays = {}, bool check_replicated = false,
                                   FileName name = FileName::kAsGiven);

  // Local, never throws: a failure is kept for finish().
  void write_data() noexcept;
  // Collective (see the header comment for the thread), after write_data: the global arrays,
  // then fsync.
  void write_arrays();
  // Collective, on write_arrays' thread: agree. Throws on every rank when any rank failed.
  void finish();

  const std::filesystem::path& file() const { return file_; }
  // The path each global array of the save takes (the same on every rank), by name.
  std::vector<std::pair<std::string, ArrayPath>> array_paths() const;
  // Where this rank's time went in the steps so far.
  const SavePhases& phases() const { return phases_; }

  PendingCheckpointV3(PendingCheckpointV3&&) noexcept = default;
  PendingCheckpointV3& operator=(PendingCheckpointV3&&) noexcept = default;

 private:
  // Whether write_data has anything of this rank's to write: per-node or ragged values, or
  // (rank 0) replicated ones.
  bool has_values_to_write() const;
  PendingCheckpointV3(std::filesystem::path file, Communicator comm,
                      std::chrono::duration<double> timeout)
      : file_(std::move(file)), comm_(std::move(comm)), timeout_(timeout) {}

  // A step of the save (UnsealedFile::agreed_step): its body's time goes to `phase`, the
  // agreement's to waiting.
  template <typename Step>
  void agreed_step(const std::string& step, SavePhase phase, bool root_only, Step&& body,
                   std::span<std::int64_t> carried = {});
  // This rank's checksums of the values write_values wrote.
  struct ValueSums {
    std::vector<std::uint64_t> nodes;       // its per-node and ragged values, in blob order
    std::vector<std::uint64_t> replicated;  // rank 0's: the replicated blobs, in blob order
    // Its blocks of the directly written global arrays: where each checksum goes, and it.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> arrays;
    // The ranges (offset, bytes) its blocks of global arrays span in the file: once durable,
    // dropped from the page cache as the collective path drops its own (MpiIoFile).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> array_ranges;
  };
  // Whether blob `i` (description order) is a global array that write_arrays writes with the
  // collective MPI-IO write; every other blob's bytes go out in the data step.
  bool written_collectively(std::size_t i) const {
    return description_.blobs[i].kind == StorageKind::kGlobalArray &&
           paths_[i] == ArrayPath::kMpiIo;
  }
  // Per blob (description order): where the checksum of a global array's first writer block
  // goes in the checksum table (0 for other blobs); writer r's follows at 8 r.
  std::vector<std::uint64_t> array_checksum_offsets() const;
  // The data step's writes of this rank's per-node, ragged and (rank 0) replicated values with
  // `writer`, and its ragged index rows with `fd`.
  ValueSums write_values(int fd, StreamingWriter& writer);
  // Describe step: checks this rank's blobs, agrees with the others on them, decides which
  // per-node blobs are ragged and where this rank's ragged bytes go, and builds description_.
  void describe(const SavedFile& root, bool check_replicated);

  std::filesystem::path file_;
  Communicator comm_;
  std::chrono::duration<double> timeout_;
  std::string context_;
  ArrayIoOptions arrays_;
  // Per blob (description order): the path of a global array (kMpiIo for any other blob).
  std::vector<ArrayPath> paths_;
  std::int64_t epoch_ = 0;
  std::vector<SavedBlob> blobs_;  // sorted by name
  // What every rank knows after begin: the description (rank 0's has the writer blocks and
  // node names; the others' only what computing offsets needs) and the layout's offsets.
  FileDescription description_;
  LayoutV3 layout_;
  // Per ragged blob (description order): this rank's byte offset in its dataset.
  std::vector<std::uint64_t> ragged_offsets_;
  UnsealedFile created_;  // rank 0's, from its creation until every rank's data is durable
  std::exception_ptr write_error_;
  // Whether write_arrays agrees after its collective open: unless every rank's MPI-IO makes a
  // failed open fail on every rank itself (the describe step's reduction said).
  bool open_needs_agreement_ = true;
  std::uint64_t bytes_written_ = 0;  // of blob data by this rank, for the direct-I/O log line
  SavePhases phases_;
};

}  // namespace epochrun
