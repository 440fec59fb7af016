#include "local_copy_load.hpp"

#include <spdlog/spdlog.h>

#include <string_view>
#include <unordered_map>

#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "host_name.hpp"
#include "local_copy.hpp"
#include "regular_file.hpp"
#include "verified_read.hpp"

namespace epochrun {
namespace {

// What the committed file records of this rank's value of blob `i`: its record (the shape of a
// global array's block is the block's count).
BlobRecord committed_value(const StoredFileV3& stored, const StoredValues& where, std::size_t i,
                           const LoadRequest& request, int rank) {
  const auto& blob = stored.description.blobs[i];
  switch (blob.kind) {
    case StorageKind::kPerNode:
    case StorageKind::kRagged:
      return where.at(i, static_cast<std::uint64_t>(rank)).record;
    case StorageKind::kReplicated:
      return where.at(i, 0).record;
    case StorageKind::kGlobalArray:
      break;
  }
  const auto& written = blob.writer_blocks.at(static_cast<std::size_t>(rank));
  const auto asked = request.array_blocks.find(blob.name);
  if (asked == request.array_blocks.end() ||
      asked->second.at(static_cast<std::size_t>(rank)) != written) {
    throw CheckpointMismatch("global array '" + blob.name +
                             "' is asked for in other blocks than it was written in");
  }
  return BlobRecord{blob.name, blob.dtype, written.count,
                    writer_checksums(stored, i).at(static_cast<std::size_t>(rank))};
}

// This rank's values from its copy, each checked against what the committed file records and
// verified as it is read. CheckpointError (of some class) when the copy cannot stand in for the
// committed file.
std::vector<std::pair<std::string, Blob>> read_local_copy(const std::filesystem::path& file,
                                                          const StoredFileV3& stored,
                                                          const LoadRequest& request,
                                                          const Communicator& comm) {
  const auto what = "node-local copy " + file.string();
  const auto fd = open_regular_file_for_reading(file);
  const auto record = read_local_copy_record(fd.get(), what);
  const auto here = host_name();
  if (record.job != request.job || record.epoch != request.epoch || record.rank != comm.rank() ||
      record.ranks != comm.size() || record.host != here) {
    throw CheckpointMismatch(
        what + " was written by job '" + record.job + "' for epoch " +
        std::to_string(record.epoch) + " as rank " + std::to_string(record.rank) + " of " +
        std::to_string(record.ranks) + " on host " + record.host + ", not as this rank " +
        std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + " on " + here);
  }
  const auto& blobs = stored.description.blobs;
  if (record.blobs.size() != blobs.size()) {
    throw CheckpointMismatch(what + " holds " + std::to_string(record.blobs.size()) +
                             " blobs, the committed file " + std::to_string(blobs.size()));
  }
  const StoredValues where(stored);
  std::unordered_map<std::string_view, const LocalCopyBlob*> copies;
  for (const auto& blob : record.blobs) {
    copies.emplace(blob.name, &blob);
  }
  std::vector<BlobRecord> committed;
  std::vector<std::uint64_t> offsets;
  committed.reserve(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    const auto& value =
        committed.emplace_back(committed_value(stored, where, i, request, comm.rank()));
    const auto found = copies.find(value.name);
    const LocalCopyBlob* copied = found == copies.end() ? nullptr : found->second;
    if (copied == nullptr || copied->dtype != value.dtype || copied->shape != value.shape ||
        copied->xxh64 != value.xxh64) {
      throw CheckpointMismatch(what + ": blob '" + value.name +
                               "' is not the value the committed file records for this rank");
    }
    offsets.push_back(copied->offset);
  }
  auto read = read_verified_blobs(fd.get(), committed, offsets, [&](std::size_t) { return what; });
  std::vector<std::pair<std::string, Blob>> values;
  values.reserve(read.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    values.emplace_back(std::move(committed[i].name), std::move(read[i]));
  }
  return values;
}

}  // namespace

std::optional<std::vector<std::pair<std::string, Blob>>> load_local_copies(
    const std::filesystem::path& dir, const StoredFileV3& stored, const LoadRequest& request,
    const Communicator& comm, std::chrono::duration<double> timeout) {
  std::vector<std::pair<std::string, Blob>> values;
  try {
    run_then_agree_within(comm, "epoch " + std::to_string(request.epoch), timeout, [&] {
      try {
        values = read_local_copy(local_copy_file(dir, request.epoch, comm.rank()), stored, request,
                                 comm);
      } catch (const CheckpointError&) {
        throw;
      } catch (const std::exception& error) {
        // Whatever keeps a copy from standing in (memory, a name that does not parse) means
        // only that the shared file is loaded.
        throw CheckpointError(error.what());
      }
    });
  } catch (const CheckpointError& error) {
    if (comm.is_root()) {
      spdlog::info(
          "not loading the node-local copies in {}, loading the checkpoint directory's "
          "file: {}",
          dir.string(), error.what());
    }
    return std::nullopt;
  }
  return values;
}

}  // namespace epochrun
