// The commit of a node-local epoch: the small manifest rank 0 writes into the checkpoint
// directory once every rank's node-local copy of an epoch that is not flushed is written and
// agreed (--flush-every, --flush-interval; docs/FORMAT.md, "Node-local epochs"). The shared file
// system carries this one file per node-local epoch instead of its data; it says which epochs
// exist node-local, on which hosts, and what each rank's copy must be for the epoch to be
// recovered. Internal to the library.
//
// DIR/epoch-NNNNNN.local.json, written atomically (temporary sibling, fsync, rename, directory
// fsync): {"format": "epochrun node-local epoch", "version": 1, "job", "epoch", "ranks",
// "redundancy": "none", "config": the configuration record, "parts": [{"rank", "host",
// "record_xxh64", "file_bytes"}, ...]} with one part per rank in rank order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace epochrun {

// One rank's node-local copy as the manifest records it.
struct LocalPart {
  int rank = 0;
  std::string host;                // where the copy was written
  std::uint64_t record_xxh64 = 0;  // local_copy_record_xxh64 of its record
  std::uint64_t file_bytes = 0;    // the copy file's size
};

struct LocalManifest {
  std::string job;
  std::int64_t epoch = 0;
  int ranks = 0;
  std::string redundancy = "none";  // how the copies are protected across hosts
  std::string config_json = "{}";   // the run's configuration record, as a checkpoint keeps it
  std::vector<LocalPart> parts;     // index = rank
};

// DIR/epoch-NNNNNN.local.json
std::filesystem::path local_manifest_file(const std::filesystem::path& checkpoint_dir,
                                          std::int64_t epoch);

// The manifest as JSON text, and back (CorruptCheckpoint naming `what` when the text is no
// whole manifest of as many parts as ranks).
std::string local_manifest_text(const LocalManifest& manifest);
LocalManifest parse_local_manifest(const std::string& text, const std::string& what);

// Writes `manifest` atomically into `checkpoint_dir` (the node-local epoch's commit). Throws
// Error.
void write_local_manifest(const std::filesystem::path& checkpoint_dir,
                          const LocalManifest& manifest);
// CheckpointNotFound when the file is missing, CorruptCheckpoint when it is no whole manifest.
LocalManifest read_local_manifest(const std::filesystem::path& checkpoint_dir, std::int64_t epoch);

// The epochs of the manifests in `checkpoint_dir`, ascending (none when it cannot be listed).
std::vector<std::int64_t> local_manifest_epochs(const std::filesystem::path& checkpoint_dir);

// Deletes the manifests of every epoch but those in `keep`, and what an interrupted write of
// one left, except the write of `writing`'s, which another thread may be making right now (a
// background exchange's rewrite). Returns how many failed to go.
int remove_local_manifests(const std::filesystem::path& checkpoint_dir,
                           const std::vector<std::int64_t>& keep,
                           std::optional<std::int64_t> writing = std::nullopt);

}  // namespace epochrun
