// One checkpoint file being saved, in the steps a save is made of, so that the data step can
// run on a background thread while the job goes on (an asynchronous save is the same steps).
// Internal to the library.
//
//   begin        collective, main thread: describe every rank's blobs, rank 0 creates and lays
//                out the file, every rank gets the offsets of its blobs;
//   write_data   this rank alone, any thread, no MPI call: its blobs' bytes at their offsets,
//                checksummed while they stream, then fsync;
//   finish       collective, main thread: agree on every rank's write, rank 0 seals the file.
//
// Committing the sealed file (rename, directory fsync, index) is CheckpointDirectory's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "blob_view.hpp"
#include "checkpoint_layout.hpp"
#include "epochrun/checkpoint_format.hpp"
#include "epochrun/communicator.hpp"
#include "unsealed_file.hpp"

namespace epochrun {

class PendingCheckpoint {
 public:
  // Collective, caller's (main) thread: describe, lay out (rank 0 creates `file` O_EXCL 0644,
  // HDF5 layout, reservation), offsets to every rank. A failure on any rank throws on every
  // rank, and rank 0 removes the file if it created it. Each agreement is bounded by `timeout`
  // (a rank that does not come ends the job, see raise_if_any_failed_within).
  static PendingCheckpoint begin(const std::filesystem::path& file, const Communicator& comm,
                                 CheckpointHeader header, std::vector<BlobView> blobs,
                                 std::chrono::duration<double> timeout);

  // Local to this rank, NO MPI call (it may run on a background thread): pwrites this rank's
  // bytes, hashing each blob while it streams, then its checksum table, and fsyncs. Never throws: a
  // failure is kept for finish(). Call it once, between begin() and finish().
  void write_data() noexcept;

  // Collective, main thread: agrees on every rank's write_data, then rank 0 seals the file
  // (integrity header, reservation given back, fsync). The file is then complete and durable.
  // Throws on every rank when any rank failed; rank 0 has removed the file.
  void finish();

  // Bytes of blob data this rank wrote (after write_data).
  std::uint64_t bytes_written() const { return bytes_written_; }
  // The sealed file's size, on rank 0 (0 elsewhere), after finish().
  std::uint64_t file_bytes() const { return file_bytes_; }
  const std::filesystem::path& file() const { return file_; }

  PendingCheckpoint(PendingCheckpoint&&) noexcept = default;
  PendingCheckpoint& operator=(PendingCheckpoint&&) noexcept = default;

 private:
  PendingCheckpoint(std::filesystem::path file, Communicator comm,
                    std::chrono::duration<double> timeout)
      : file_(std::move(file)), comm_(std::move(comm)), timeout_(timeout) {}

  // Runs a collective step; on failure rank 0 removes the file it created, then rethrows.
  template <typename Step>
  void agreed_step(const std::string& step, bool root_only, Step&& body);

  std::filesystem::path file_;
  Communicator comm_;
  std::chrono::duration<double> timeout_;
  std::string context_;
  int rank_ = 0;
  std::int64_t epoch_ = 0;
  std::vector<BlobView> blobs_;
  std::vector<BlobRecord> records_;     // this rank's, in blobs_ order
  std::vector<std::uint64_t> offsets_;  // of this rank's blobs in the file
  std::uint64_t checksums_offset_ = 0;  // of this rank's checksum table
  UnsealedFile created_;                // rank 0's, from its creation to its seal
  CheckpointLayout layout_;             // rank 0's
  std::exception_ptr write_error_;      // write_data's failure, for finish()
  std::uint64_t bytes_written_ = 0;
  std::uint64_t file_bytes_ = 0;
};

}  // namespace epochrun
