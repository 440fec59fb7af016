#include "checkpoint_file_collective.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

#include "blob_records.hpp"
#include "checkpoint_groups.hpp"
#include "checkpoint_judge.hpp"
#include "checkpoint_layout.hpp"
#include "checkpoint_reader_v3.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "global_array_read.hpp"
#include "integrity_header.hpp"
#include "regular_file.hpp"
#include "verified_read.hpp"

namespace epochrun {
namespace {

// Where a node's blob `i` (in save order) is, as the layout says.
BlobPlace place_of(const CheckpointLayout& layout, const std::string& node, std::size_t i) {
  const auto packed = layout.packed.find(node);
  return BlobPlace{layout.offsets.at(node).at(i),
                   packed != layout.packed.end() && packed->second.at(i)};
}

std::vector<BlobPlace> places_of(const CheckpointLayout& layout, const std::string& node) {
  const auto& offsets = layout.offsets.at(node);
  const auto packed = layout.packed.find(node);
  std::vector<BlobPlace> places;
  places.reserve(offsets.size());
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    places.push_back(BlobPlace{offsets[i], packed != layout.packed.end() && packed->second.at(i)});
  }
  return places;
}

// How errors name a blob: by its dataset, or by its pack.
std::string blob_what(const std::string& node, const std::string& blob, bool packed) {
  return packed
             ? "packed blob " + node + "/" + blob + " (in /" + kIndexGroup + "/" + node + "/packed)"
             : "dataset /" + std::string(kNodesGroup) + "/" + node + "/" + blob;
}

// Reads a node's blobs, verifying each (read_verified_blobs: a pack in a few reads).
std::vector<Blob> read_blobs(int fd, const std::vector<BlobRecord>& records,
                             const std::vector<BlobPlace>& places, const std::string& node) {
  std::vector<std::uint64_t> offsets;
  offsets.reserve(places.size());
  for (const auto& place : places) {
    offsets.push_back(place.offset);
  }
  return read_verified_blobs(fd, records, offsets, [&](std::size_t i) {
    return blob_what(node, records[i].name, places[i].packed);
  });
}

void check_expectation(const CheckpointHeader& header, const CheckpointExpectation& expected) {
  if (header.epoch != expected.epoch) {
    throw CorruptCheckpoint("the file is named for epoch " + std::to_string(expected.epoch) +
                            " but records epoch " + std::to_string(header.epoch));
  }
  if (header.job != expected.job) {
    throw CheckpointMismatch("it belongs to job '" + header.job + "', this run is job '" +
                             expected.job + "'");
  }
  if (header.node_names.size() != expected.node_names.size()) {
    throw CheckpointMismatch(
        "it was written by " + std::to_string(header.node_names.size()) + " ranks, this run has " +
        std::to_string(expected.node_names.size()) +
        " (a file of format version 1 or 2 loads only at the rank count that wrote it)");
  }
  if (header.node_names != expected.node_names) {
    throw CheckpointMismatch("its node names differ from this run's");
  }
}

}  // namespace

std::uint64_t CheckpointHeader::total_blob_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [node, records] : blobs) {
    for (const auto& record : records) {
      total += record.byte_size();
    }
  }
  for (const auto& record : replicated) {
    total += record.byte_size();
  }
  for (const auto& array : arrays) {
    total += array.byte_size();
  }
  return total;
}

std::vector<std::string> read_checkpoint_file(const std::filesystem::path& file,
                                              const Communicator& comm,
                                              const CheckpointExpectation& expected,
                                              Workspace& workspace,
                                              std::chrono::duration<double> timeout) {
  const std::string context = "checkpoint " + file.string();
  // Rank 0 verifies the whole file but its data before anyone reads a byte of data: the
  // integrity header before libhdf5 parses anything, then every dataset's layout.
  // Each rank's encoded records, in rank order (rank 0's only).
  std::vector<std::vector<std::byte>> records_by_rank;
  run_on_root_then_agree_within(comm, context, timeout, [&] {
    auto fd = open_regular_file_for_reading(file);
    auto judged = judge_checkpoint(fd.get(), context);
    if (!judged.older) {
      throw CheckpointMismatch("format version " + std::to_string(judged.format_version) +
                               " is not version 1 or 2");
    }
    const auto& layout = *judged.older;
    check_expectation(layout.header, expected);
    if (layout.header.node_names.size() != static_cast<std::size_t>(comm.size())) {
      throw Error("it names " + std::to_string(layout.header.node_names.size()) +
                  " nodes for the " + std::to_string(comm.size()) + " ranks loading it");
    }
    for (const auto& node : layout.header.node_names) {
      records_by_rank.push_back(
          encode_records(layout.header.blobs.at(node), places_of(layout, node)));
    }
  });
  const auto my_records = comm.scatter(records_by_rank);

  // Each rank reads its own node's blobs; the workspace changes only once all ranks have theirs.
  std::vector<BlobRecord> records;
  std::vector<Blob> blobs;
  run_then_agree_within(comm, context, timeout, [&] {
    std::vector<BlobPlace> places;
    records = decode_records(my_records, &places);
    const auto& node = expected.node_names[static_cast<std::size_t>(comm.rank())];
    auto fd = open_regular_file_for_reading(file);
    blobs = read_blobs(fd.get(), records, places, node);
  });

  std::vector<std::string> names;
  names.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    workspace.put(records[i].name, std::move(blobs[i]));
    names.push_back(std::move(records[i].name));
  }
  return names;
}

struct CheckpointReader::Impl {
  std::filesystem::path file;
  FileDescriptor fd{-1};
  std::uint64_t file_bytes = 0;
  // Versions 1 and 2 as read; version 3 seen the same way for its per-node blobs.
  CheckpointLayout layout;
  // Version 3 only: the file as read, for its replicated blobs and global arrays.
  std::optional<StoredFileV3> v3;

  // The buffer the verifications read through (kVerifyPiece bytes, made at the first), and
  // the lock that gives it to one at a time.
  mutable std::mutex scratch_lock;
  mutable std::unique_ptr<std::byte[]> scratch;

  std::string context() const { return "checkpoint " + file.string(); }
  // Node `node`'s blob `blob`: its record, where it is, and how errors name it;
  // CheckpointError when there is none.
  struct Found {
    const BlobRecord* record = nullptr;
    BlobPlace place;
    std::string what;
  };
  Found find(const std::string& node, const std::string& blob) const {
    const auto& blobs = layout.header.blobs;
    auto found = blobs.find(node);
    if (found == blobs.end()) {
      throw CheckpointError(context() + ": it has no node '" + node + "'");
    }
    auto record = std::find_if(found->second.begin(), found->second.end(),
                               [&](const BlobRecord& entry) { return entry.name == blob; });
    if (record == found->second.end()) {
      throw CheckpointError(context() + ": node '" + node + "' has no blob '" + blob + "'");
    }
    const auto place =
        place_of(layout, node, static_cast<std::size_t>(record - found->second.begin()));
    // Version 3 keeps a node's value as a row of the blob's dataset, or in the one pack.
    auto what = !v3            ? blob_what(node, blob, place.packed)
                : place.packed ? "packed blob " + node + "/" + blob + " (in /index/packed)"
                               : "dataset /nodes/" + blob + ", the value of node " + node;
    return Found{&*record, place, std::move(what)};
  }
  // Runs `verify` with the buffer, this reader's verifications one at a time.
  template <typename Verify>
  std::uint64_t with_scratch(Verify&& verify) const {
    const std::lock_guard lock(scratch_lock);
    if (!scratch) {
      // Not zeroed: every byte of it is read into before it is hashed.
      scratch = std::make_unique_for_overwrite<std::byte[]>(kVerifyPiece);
    }
    return verify(std::span(scratch.get(), kVerifyPiece));
  }
  // The version 3 blob `name` of `kind`; CheckpointError naming what the file lacks.
  std::size_t v3_blob(const std::string& name, StorageKind kind, const char* what) const {
    const auto found = v3 ? find_blob_v3(*v3, name, kind) : std::nullopt;
    if (!found) {
      throw CheckpointError(
          context() + ": it has no " + what + " '" + name + "'" +
          (v3 ? ""
              : " (format version " + std::to_string(layout.header.format_version) + " has none)"));
    }
    return *found;
  }
};

CheckpointReader::CheckpointReader(const std::filesystem::path& file)
    : impl_(std::make_unique<Impl>()) {
  impl_->file = file;
  try {
    impl_->fd = open_regular_file_for_reading(file);
    auto judged = judge_checkpoint(impl_->fd.get(), file.string());
    impl_->file_bytes = judged.integrity.file_size;
    if (judged.v3) {
      impl_->v3 = std::move(judged.v3);
      impl_->layout = layout_of_v3(*impl_->v3);
    } else {
      impl_->layout = std::move(*judged.older);
    }
  } catch (...) {
    rethrow_with_context(std::current_exception(), "checkpoint " + file.string());
  }
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const CheckpointHeader& CheckpointReader::header() const {
  return impl_->layout.header;
}

std::uint64_t CheckpointReader::file_bytes() const {
  return impl_->file_bytes;
}

Blob CheckpointReader::read_blob(const std::string& node, const std::string& blob) const {
  const auto found = impl_->find(node, blob);
  try {
    return read_verified_blob(impl_->fd.get(), *found.record, found.place.offset, found.what);
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

std::uint64_t CheckpointReader::verify_blob(const std::string& node,
                                            const std::string& blob) const {
  const auto found = impl_->find(node, blob);
  try {
    return impl_->with_scratch([&](std::span<std::byte> scratch) {
      verify_stored_blob(impl_->fd.get(), *found.record, found.place.offset, found.what, scratch);
      return found.record->byte_size();
    });
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

Blob CheckpointReader::read_replicated(const std::string& name) const {
  const auto blob = impl_->v3_blob(name, StorageKind::kReplicated, "replicated blob");
  try {
    return read_replicated_v3(impl_->fd.get(), *impl_->v3, blob);
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

Blob CheckpointReader::read_array(const std::string& name, std::optional<Block> part) const {
  const auto blob = impl_->v3_blob(name, StorageKind::kGlobalArray, "global array");
  try {
    return read_array_v3(impl_->fd.get(), *impl_->v3, blob, part);
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

std::uint64_t CheckpointReader::verify_replicated(const std::string& name) const {
  const auto blob = impl_->v3_blob(name, StorageKind::kReplicated, "replicated blob");
  try {
    return impl_->with_scratch([&](std::span<std::byte> scratch) {
      return verify_replicated_v3(impl_->fd.get(), *impl_->v3, blob, scratch);
    });
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

std::uint64_t CheckpointReader::verify_array(const std::string& name) const {
  const auto blob = impl_->v3_blob(name, StorageKind::kGlobalArray, "global array");
  try {
    return impl_->with_scratch([&](std::span<std::byte> scratch) {
      return verify_array_v3(impl_->fd.get(), *impl_->v3, blob, scratch);
    });
  } catch (...) {
    rethrow_with_context(std::current_exception(), impl_->context());
  }
}

}  // namespace epochrun
