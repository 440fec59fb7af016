#include "local_epoch_load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "host_name.hpp"
#include "local_copy.hpp"
#include "local_recovery.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"
#include "verified_read.hpp"

namespace epochrun {
namespace {

// The seam of the cross-host redundancy at a restart (--local-redundancy partner|xor,
// local_redundancy.hpp), before a node-local epoch is judged recoverable: a rank whose copy is
// missing from its node-local directory (its host was lost, or it now runs on a replacement
// host) gets it rebuilt there, from a partner's copy or its set's parity, verified against the
// manifest's record before it is used. Collective. With --local-redundancy none (the manifest's
// "redundancy"): nothing; a missing copy makes the epoch unrecoverable.
// When any rank's copy is missing, or is not the one the manifest records (its size, its
// record's xxh64), every rank takes part in recover_local_copies (local_recovery.hpp). Returns
// where each host's parts came from ("" when every copy was in place); CheckpointError when
// some part cannot be rebuilt (the same on every rank).
std::string restore_missing_copies(const std::filesystem::path& dir, const LocalManifest& manifest,
                                   const Communicator& comm,
                                   std::chrono::duration<double> timeout) {
  if (manifest.redundancy == "none") {
    return "";
  }
  const auto context = "node-local epoch " + std::to_string(manifest.epoch) + ": copies";
  std::int64_t missing = 0;
  run_then_agree_within(
      comm, context, timeout,
      [&] {
        const auto& part = manifest.parts.at(static_cast<std::size_t>(comm.rank()));
        try {
          const auto file = local_copy_file(dir, manifest.epoch, comm.rank());
          const auto fd = open_regular_file_for_reading(file);
          missing = file_size(fd.get()) != part.file_bytes ||
                    local_copy_record_xxh64(read_local_copy_record(fd.get(), file.string())) !=
                        part.record_xxh64;
        } catch (const CheckpointError&) {
          missing = 1;  // not there, or not a whole copy
        }
      },
      std::span(&missing, 1));
  if (missing == 0) {
    return "";
  }
  const auto report = recover_local_copies(dir, manifest.epoch, comm, RedundancyCall{timeout, ""});
  if (!report.complete()) {
    throw CheckpointError(fmt::format(
        "the node-local part{} of rank{} {} cannot be rebuilt ({}): {}",
        report.unrecoverable.size() == 1 ? "" : "s", report.unrecoverable.size() == 1 ? "" : "s",
        fmt::join(report.unrecoverable, ", "), manifest.redundancy,
        fmt::join(report.host_lines, "; ")));
  }
  return fmt::format("{}", fmt::join(report.host_lines, "; "));
}

// This rank's values from its copy, each verified; CheckpointError when the copy is not the one
// the manifest commits.
std::vector<std::pair<std::string, Blob>> read_committed_copy(const std::filesystem::path& file,
                                                              const LocalManifest& manifest,
                                                              const LoadRequest& request,
                                                              const Communicator& comm) {
  const auto& part = manifest.parts.at(static_cast<std::size_t>(comm.rank()));
  const auto what = "node-local copy " + file.string();
  const auto fd = open_regular_file_for_reading(file);
  const auto record = read_local_copy_record(fd.get(), what);
  if (file_size(fd.get()) != part.file_bytes ||
      local_copy_record_xxh64(record) != part.record_xxh64) {
    throw CorruptCheckpoint(what + " is not the copy the manifest of epoch " +
                            std::to_string(manifest.epoch) + " commits");
  }
  if (record.job != manifest.job || record.epoch != manifest.epoch || record.rank != comm.rank() ||
      record.ranks != manifest.ranks) {
    throw CheckpointMismatch(what + " was written by job '" + record.job + "' for epoch " +
                             std::to_string(record.epoch) + " as rank " +
                             std::to_string(record.rank) + " of " + std::to_string(record.ranks));
  }
  std::vector<BlobRecord> records;
  std::vector<std::uint64_t> offsets;
  for (const auto& blob : record.blobs) {
    if (blob.kind == StorageKind::kGlobalArray) {
      const auto asked = request.array_blocks.find(blob.name);
      if (asked == request.array_blocks.end() ||
          asked->second.at(static_cast<std::size_t>(comm.rank())).count != blob.shape) {
        throw CheckpointMismatch("global array '" + blob.name +
                                 "' is asked for in other blocks than it was written in");
      }
    }
    records.push_back(BlobRecord{blob.name, blob.dtype, blob.shape, blob.xxh64});
    offsets.push_back(blob.offset);
  }
  auto read = read_verified_blobs(fd.get(), records, offsets, [&](std::size_t) { return what; });
  std::vector<std::pair<std::string, Blob>> values;
  for (std::size_t i = 0; i < read.size(); ++i) {
    values.emplace_back(std::move(records[i].name), std::move(read[i]));
  }
  return values;
}

}  // namespace

Loaded load_local_epoch(const std::filesystem::path& dir, const LocalManifest& manifest,
                        const LoadRequest& request, const Communicator& comm, Workspace& workspace,
                        std::chrono::duration<double> timeout) {
  if (manifest.ranks != comm.size()) {
    throw CheckpointMismatch(fmt::format(
        "it was saved node-local by {} ranks, and a node-local epoch resumes only on as many",
        manifest.ranks));
  }
  if (manifest.job != request.job) {
    throw CheckpointMismatch("it is job '" + manifest.job + "''s, not '" + request.job + "''s");
  }
  const auto recovered_parts = restore_missing_copies(dir, manifest, comm, timeout);
  std::vector<std::pair<std::string, Blob>> values;
  const auto context = "node-local epoch " + std::to_string(manifest.epoch);
  try {
    const step_times::Named step("read the node-local epoch");
    run_then_agree_within(comm, context, timeout, [&] {
      const auto& part = manifest.parts.at(static_cast<std::size_t>(comm.rank()));
      try {
        values = read_committed_copy(local_copy_file(dir, manifest.epoch, comm.rank()), manifest,
                                     request, comm);
      } catch (const std::exception& error) {
        // Whatever keeps a copy from being loaded makes the epoch unrecoverable.
        throw CheckpointError(fmt::format("the node-local copy written on {}, read on {}: {}",
                                          part.host, host_name(), error.what()));
      }
    });
  } catch (const CheckpointError& error) {
    // "rank 1: the node-local copy written on host2, ...": the epoch is the caller's to name.
    std::string_view why = error.what();
    if (why.starts_with(context + ": ")) {
      why.remove_prefix(context.size() + 2);
    }
    throw CheckpointError(std::string(why));
  }
  Loaded loaded;
  loaded.written_by_ranks = manifest.ranks;
  loaded.config_json = manifest.config_json;
  loaded.from_local_copies = true;
  loaded.recovered_parts = recovered_parts;
  for (auto& [name, blob] : values) {
    workspace.put(name, std::move(blob));
    loaded.blobs.push_back(name);
  }
  return loaded;
}

}  // namespace epochrun
