#include "pending_checkpoint_v3.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include "blob_index.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "file_system_kind.hpp"
#include "global_array_io.hpp"
#include "h5_objects.hpp"
#include "integrity_header.hpp"
#include "layout_replay.hpp"
#include "page_cache.hpp"
#include "regular_file.hpp"
#include "seconds_since.hpp"
#include "step_times.hpp"
#include "stored_file_codec.hpp"

namespace epochrun {
namespace {

std::int64_t hash_of(const std::string& text) {
  return static_cast<std::int64_t>(XXH64(text.data(), text.size(), 0));
}

// What every rank must declare alike: names, kinds, dtypes, and the shapes that are not
// per-node (a replicated value's, a global array's global shape).
std::int64_t declaration_hash(const std::vector<SavedBlob>& blobs) {
  std::string text;
  for (const auto& blob : blobs) {
    text += blob.view.name + '\0' + std::to_string(static_cast<int>(blob.kind)) + '\0' +
            std::string(dtype_name(blob.view.dtype)) + '\0';
    const auto& shape =
        blob.kind == StorageKind::kGlobalArray ? blob.global_shape : blob.view.shape;
    text += blob.kind == StorageKind::kPerNode ? "" : shape_to_string(shape);
    text += '\n';
  }
  return hash_of(text);
}

// Describe step, this rank alone: the blobs are valid and hold the bytes their shapes say, and
// each global array's block on this rank (`rank` of `ranks`) the bytes of its block: a rank
// whose block could not go into the collective write must say so here, before any rank enters
// the collective calls.
void check_blobs(const std::vector<SavedBlob>& blobs, int rank, int ranks) {
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    const auto& blob = blobs[i];
    validate_name(blob.view.name, "blob name");
    if (i > 0 && blobs[i - 1].view.name == blob.view.name) {
      throw UsageError("blob '" + blob.view.name + "' is saved twice");
    }
    const auto& shape =
        blob.kind == StorageKind::kGlobalArray ? blob.global_shape : blob.view.shape;
    if (shape.size() > static_cast<std::size_t>(h5::kMaxDimensions)) {
      throw UsageError("blob '" + blob.view.name + "' has " + std::to_string(shape.size()) +
                       " dimensions; a checkpoint holds at most " +
                       std::to_string(h5::kMaxDimensions));
    }
    if (element_count(blob.view.shape) * element_size(blob.view.dtype) != blob.view.bytes.size()) {
      throw UsageError("blob '" + blob.view.name + "' has " +
                       std::to_string(blob.view.bytes.size()) + " bytes for its shape " +
                       shape_to_string(blob.view.shape));
    }
    if (blob.kind == StorageKind::kGlobalArray &&
        (!blob.blocks || blob.blocks->size() != static_cast<std::size_t>(ranks))) {
      throw UsageError("global array '" + blob.view.name + "' has no block for every rank");
    }
    if (blob.kind == StorageKind::kGlobalArray) {
      const auto& block = (*blob.blocks)[static_cast<std::size_t>(rank)];
      if (blob.view.bytes.size() != block.element_count() * element_size(blob.view.dtype)) {
        throw UsageError("global array '" + blob.view.name + "': a block " +
                         block_to_string(block) + " of " + std::to_string(blob.view.bytes.size()) +
                         " bytes");
      }
    }
    if (blob.kind == StorageKind::kRagged) {
      throw UsageError("blob '" + blob.view.name + "': the ranks decide which blobs are ragged");
    }
  }
}

// An upper bound of the file's size: the data, the index rows counted exactly, and a generous
// allowance for HDF5's metadata (under 1 KiB per dataset and group, measured; twice that).
std::uint64_t estimated_file_bytes(const FileDescription& description) {
  const std::uint64_t ranks = description.ranks();
  std::uint64_t bytes = 16384 + 2 * description.config_json.size();
  for (const auto& node : description.node_names) {
    bytes += 2 * node.size() + 16;
  }
  for (const auto& blob : description.blobs) {
    bytes += 2048 + 4 * blob.name.size() + 64 + 8 * blob.shape.size();
    switch (blob.kind) {
      case StorageKind::kPerNode:
        bytes += ranks * (blob.value_bytes() + 8);
        break;
      case StorageKind::kRagged:
        bytes += blob.value_bytes() + ranks * (8 + 1 + 8 * description.ragged_dimensions + 16);
        break;
      case StorageKind::kReplicated:
        bytes += blob.value_bytes() + 8;
        break;
      case StorageKind::kGlobalArray:
        bytes += blob.value_bytes() + blob.writer_blocks.size() * (8 + 16 * blob.shape.size());
        break;
    }
  }
  return bytes + user_block_size_for(description.blobs.size() + 3,
                                     layout_record_bytes_at_most(description));
}

// The layout's numbers, flattened for a broadcast and back.
std::vector<std::int64_t> flatten(const LayoutV3& layout) {
  std::vector<std::int64_t> flat = {static_cast<std::int64_t>(layout.user_block_size),
                                    static_cast<std::int64_t>(layout.pack_offset),
                                    static_cast<std::int64_t>(layout.pack_row_bytes),
                                    static_cast<std::int64_t>(layout.checksums_offset),
                                    static_cast<std::int64_t>(layout.per_node_blobs),
                                    static_cast<std::int64_t>(layout.ragged_index_offset),
                                    static_cast<std::int64_t>(layout.ragged_row_bytes)};
  for (std::size_t i = 0; i < layout.offsets.size(); ++i) {
    flat.push_back(static_cast<std::int64_t>(layout.offsets[i]));
    flat.push_back(layout.packed[i] ? 1 : 0);
    flat.push_back(static_cast<std::int64_t>(layout.in_pack[i]));
  }
  return flat;
}

constexpr std::size_t kFlatHead = 7;

LayoutV3 unflatten(std::span<const std::int64_t> flat, std::size_t blobs) {
  if (flat.size() != kFlatHead + 3 * blobs) {
    throw MpiError("received a layout of " + std::to_string(flat.size()) + " numbers for " +
                   std::to_string(blobs) + " blobs");
  }
  const auto at = [&](std::size_t i) { return static_cast<std::uint64_t>(flat[i]); };
  LayoutV3 layout;
  layout.user_block_size = at(0);
  layout.pack_offset = at(1);
  layout.pack_row_bytes = at(2);
  layout.checksums_offset = at(3);
  layout.per_node_blobs = at(4);
  layout.ragged_index_offset = at(5);
  layout.ragged_row_bytes = at(6);
  for (std::size_t i = 0; i < blobs; ++i) {
    layout.offsets.push_back(at(kFlatHead + 3 * i));
    layout.packed.push_back(flat[kFlatHead + 3 * i + 1] != 0);
    layout.in_pack.push_back(at(kFlatHead + 3 * i + 2));
  }
  return layout;
}

// A file name (at most NAME_MAX, 255 bytes) in the numbers of the lay-out's broadcast.
constexpr std::size_t kNameWords = 256 / 8;

void put_name(const std::string& name, std::span<std::int64_t> words) {
  if (name.size() >= 8 * words.size()) {
    throw Error("temporary name '" + name + "' is too long");
  }
  std::memcpy(words.data(), name.data(), name.size());
}

std::string get_name(std::span<const std::int64_t> words) {
  const auto* bytes = reinterpret_cast<const char*>(words.data());
  const auto* end = std::find(bytes, bytes + 8 * words.size(), '\0');
  if (end == bytes || end == bytes + 8 * words.size()) {
    throw MpiError("received no temporary name with the layout");
  }
  return {bytes, end};
}

// What the ranks agreed on their blobs (sorted by name, the same names on every rank): whether
// each one's shape differs between nodes, and the most dimensions any node gives it.
struct BlobAgreement {
  std::vector<bool> shape_differs;
  std::vector<std::size_t> most_dimensions;
};

// What every rank must declare alike, per blob: [declarations, each per-node shape, each
// ndim, each replicated checksum when checked] (blobs sorted by name).
std::vector<std::int64_t> blob_hashes(const std::vector<SavedBlob>& blobs, bool check_replicated) {
  std::vector<std::int64_t> hashes = {declaration_hash(blobs)};
  for (const auto& blob : blobs) {
    hashes.push_back(blob.kind == StorageKind::kPerNode ? hash_of(shape_to_string(blob.view.shape))
                                                        : 0);
  }
  for (const auto& blob : blobs) {
    hashes.push_back(static_cast<std::int64_t>(blob.view.shape.size()));
  }
  for (const auto& blob : blobs) {
    const bool compared = check_replicated && blob.kind == StorageKind::kReplicated;
    hashes.push_back(compared ? static_cast<std::int64_t>(
                                    XXH64(blob.view.bytes.data(), blob.view.bytes.size(), 0))
                              : 0);
  }
  return hashes;
}

// The values `from` and their complements after them: the max over the ranks of both gives
// each value's max and min (the max of ~x is ~min x).
std::vector<std::int64_t> with_complements(std::vector<std::int64_t> from) {
  const std::size_t values = from.size();
  for (std::size_t i = 0; i < values; ++i) {
    from.push_back(~from[i]);
  }
  return from;
}

// From how many bytes a rank's collectively written blocks are hashed on a thread beside the
// collective open (below, a thread's start costs more than the hash: 64 KiB take microseconds).
constexpr std::uint64_t kHashBesideFrom = std::uint64_t{1} << 20;

// What the describe step's reduction carries, of a fixed size whatever the blobs: their count,
// their declarations' hash, one hash over every per-node shape and one over every replicated
// checksum, and whether a failed collective open fails on this rank's every peer
// (MpiIoFile::failed_open_fails_everywhere), with their complements. When the shapes and the
// checksums agree everywhere -- no ragged blob, no replicated blob that differs: the usual
// save -- the ranks agree on their blobs with no reduction of their own.
constexpr std::size_t kSummaryValues = 5;
constexpr std::size_t kOpenFailsEverywhere = 4;

std::vector<std::int64_t> blob_summary(const std::vector<std::int64_t>& hashes) {
  const std::size_t count = (hashes.size() - 1) / 3;
  const auto hash_range = [&](std::size_t first) {
    return static_cast<std::int64_t>(XXH64(hashes.data() + first, 8 * count, 0));
  };
  return with_complements({static_cast<std::int64_t>(count), hashes[0], hash_range(1),
                           hash_range(1 + 2 * count),
                           MpiIoFile::failed_open_fails_everywhere() ? 1 : 0});
}

// Collective when it must be: the ranks agree on their declarations by the max and min of
// hashes of them. `summary` is blob_summary's, reduced (the describe step's agreement carried
// it); when it shows per-node shapes or (check_replicated) replicated checksums that differ
// somewhere, one reduction over `hashes` and their complements says which. UsageError, the
// same on every rank, when the ranks declare other blobs or (check_replicated) when a
// replicated blob differs, naming it.
BlobAgreement agree_on_blobs(const Communicator& comm, const std::string& context,
                             const std::vector<SavedBlob>& blobs,
                             const std::vector<std::int64_t>& hashes,
                             const std::vector<std::int64_t>& summary) {
  const auto summary_differs = [&](std::size_t i) {
    return summary[i] != ~summary[kSummaryValues + i];
  };
  if (summary_differs(0)) {
    throw UsageError(context + ": the ranks save different numbers of blobs (" +
                     std::to_string(~summary[kSummaryValues]) + " to " +
                     std::to_string(summary[0]) + ")");
  }
  if (summary_differs(1)) {
    throw UsageError(context +
                     ": the ranks do not declare the same blobs (names, kinds, dtypes, and the "
                     "shapes of replicated blobs and global arrays)");
  }
  const std::size_t count = blobs.size();
  BlobAgreement outcome;
  if (!summary_differs(2) && !summary_differs(3)) {
    outcome.shape_differs.assign(count, false);
    for (std::size_t i = 0; i < count; ++i) {
      outcome.most_dimensions.push_back(static_cast<std::size_t>(hashes[1 + count + i]));
    }
    return outcome;
  }
  auto agreed = with_complements(hashes);
  comm.allreduce(std::span(agreed), Reduction::kMax);
  const std::size_t values = hashes.size();
  const auto differs = [&](std::size_t i) { return agreed[i] != ~agreed[values + i]; };
  std::string differing;
  for (std::size_t i = 0; i < count; ++i) {
    if (differs(1 + 2 * count + i)) {
      differing += (differing.empty() ? "'" : ", '") + blobs[i].view.name + "'";
    }
    outcome.shape_differs.push_back(differs(1 + i));
    outcome.most_dimensions.push_back(static_cast<std::size_t>(agreed[1 + count + i]));
  }
  if (!differing.empty()) {
    throw UsageError(context + ": the replicated blobs " + differing +
                     " differ between ranks (--check-replicated)");
  }
  return outcome;
}

// What rank 0 lays the file out from, which every rank knows after the agreement: `totals`
// holds each ragged blob's bytes over all nodes.
FileDescription description_of(const SavedFile& root, const std::vector<SavedBlob>& blobs,
                               const BlobAgreement& agreed,
                               const std::vector<std::int64_t>& totals) {
  FileDescription description{root.epoch, root.job, root.node_names, root.config_json, {}, 1};
  for (std::size_t i = 0, r = 0; i < blobs.size(); ++i) {
    const auto& blob = blobs[i];
    BlobDescription described{blob.view.name, blob.kind, blob.view.dtype, blob.view.shape, 0, {}};
    if (blob.kind == StorageKind::kRagged) {
      described.shape.clear();
      described.ragged_elements =
          static_cast<std::uint64_t>(totals[r++]) / element_size(blob.view.dtype);
      description.ragged_dimensions =
          std::max(description.ragged_dimensions, agreed.most_dimensions[i]);
    } else if (blob.kind == StorageKind::kGlobalArray) {
      described.shape = blob.global_shape;
      described.writer_blocks = *blob.blocks;
    }
    description.blobs.push_back(std::move(described));
  }
  return description;
}

}  // namespace

template <typename Step>
void PendingCheckpointV3::agreed_step(const std::string& step, SavePhase phase, bool root_only,
                                      Step&& body, std::span<std::int64_t> carried) {
  timed_step(
      phases_, phase,
      [&](auto&& timed) {
        created_.agreed_step(comm_, context_ + ": " + step, timeout_, root_only, timed, carried);
      },
      std::forward<Step>(body));
}

void PendingCheckpointV3::describe(const SavedFile& root, bool check_replicated) {
  const int ranks = comm_.size();
  // The blobs' summary travels in this step's agreement: one collective for both.
  std::vector<std::int64_t> hashes;
  std::vector<std::int64_t> summary(2 * kSummaryValues);
  agreed_step(
      "describe", SavePhase::kDescribe, false,
      [&] {
        if (root.node_names.size() != static_cast<std::size_t>(ranks)) {
          throw Error("the file names " + std::to_string(root.node_names.size()) + " nodes for " +
                      std::to_string(ranks) + " ranks");
        }
        std::sort(blobs_.begin(), blobs_.end(),
                  [](const SavedBlob& a, const SavedBlob& b) { return a.view.name < b.view.name; });
        check_blobs(blobs_, comm_.rank(), ranks);
        hashes = blob_hashes(blobs_, check_replicated);
        // Into the agreement's own buffer, which it holds already.
        const auto made = blob_summary(hashes);
        std::copy(made.begin(), made.end(), summary.begin());
      },
      summary);
  const auto agreeing = step_times::Clock::now();
  const PhaseTimer timer(phases_, SavePhase::kDescribe);
  const auto agreed = agree_on_blobs(comm_, context_, blobs_, hashes, summary);
  // Every rank's MPI-IO agrees on a failed open (the least of the ranks' answers is 1).
  open_needs_agreement_ = ~summary[kSummaryValues + kOpenFailsEverywhere] != 1;
  step_times::add_since("agree on blobs", agreeing);
  // Per-node blobs whose shape differs between nodes are ragged: each node's bytes go back to
  // back in rank order, at the offset a prefix sum gives.
  std::vector<std::int64_t> ragged_bytes;
  for (std::size_t i = 0; i < blobs_.size(); ++i) {
    if (blobs_[i].kind == StorageKind::kPerNode && agreed.shape_differs[i]) {
      blobs_[i].kind = StorageKind::kRagged;
      ragged_bytes.push_back(static_cast<std::int64_t>(blobs_[i].view.bytes.size()));
    }
  }
  std::vector<std::int64_t> totals = ragged_bytes;
  if (!ragged_bytes.empty()) {
    comm_.exclusive_scan_sum(std::span(ragged_bytes));
    comm_.allreduce(std::span(totals), Reduction::kSum);
  }
  ragged_offsets_.assign(ragged_bytes.begin(), ragged_bytes.end());
  description_ = description_of(root, blobs_, agreed, totals);
}

PendingCheckpointV3 PendingCheckpointV3::begin(const std::filesystem::path& file,
                                               const Communicator& comm, SavedFile root,
                                               std::vector<SavedBlob> blobs,
                                               std::chrono::duration<double> timeout,
                                               ArrayIoOptions arrays, bool check_replicated,
                                               FileName name) {
  PendingCheckpointV3 pending(file, comm, timeout);
  pending.context_ = "write checkpoint " + file.string();
  pending.arrays_ = std::move(arrays);
  pending.epoch_ = root.epoch;
  pending.blobs_ = std::move(blobs);
  pending.describe(root, check_replicated);

  // Lay-out step (rank 0): the file created and laid out from one description per blob name,
  // and sealed at once: every byte the ranks write next lies in a data extent, so its metadata
  // is final, and the data step's fsyncs make the header durable with the data. A save then
  // waits for the disk once, as a plain write does, rather than once more for the seal.
  // Its outcome, the layout's numbers, whether the file system takes direct writes (rank 0 asks
  // the file it created) and the temporary name rank 0 picked reach every rank in one
  // broadcast: every rank knows how many numbers come.
  const auto blob_count = pending.description_.blobs.size();
  const bool temporary = name == FileName::kTemporarySibling;
  const std::size_t safe_at = kFlatHead + 3 * blob_count;
  const std::size_t name_at = safe_at + 1;
  std::vector<std::int64_t> carried(name_at + (temporary ? kNameWords : 0));
  pending.agreed_step(
      "lay out", SavePhase::kLayOut, true,
      [&] {
        if (temporary) {
          pending.file_ = temporary_sibling(file);
        }
        pending.layout_ = pending.created_.create_and_lay_out(
            pending.file_, estimated_file_bytes(pending.description_), pending.epoch_,
            [&](int fd, const std::function<void()>& created) {
              carried[safe_at] = direct_writes_safe(file_system_kind(fd)) ? 1 : 0;
              return lay_out_or_replay_v3(fd, pending.description_, created);
            });
        pending.created_.seal_before_data(pending.layout_.user_block_size, pending.layout_.extents,
                                          layout_record_for(pending.description_, pending.layout_));
        const auto flat = flatten(pending.layout_);
        std::copy(flat.begin(), flat.end(), carried.begin());
        if (temporary) {
          put_name(pending.file_.filename().string(), std::span(carried).subspan(name_at));
        }
      },
      carried);
  if (!comm.is_root()) {
    pending.layout_ = unflatten(std::span(carried).first(kFlatHead + 3 * blob_count), blob_count);
    if (temporary) {
      pending.file_ = file.parent_path() / get_name(std::span(carried).subspan(name_at));
    }
  }
  for (const auto& blob : pending.description_.blobs) {
    pending.paths_.push_back(blob.kind == StorageKind::kGlobalArray
                                 ? choose_array_path(pending.arrays_.path, blob.shape,
                                                     blob.writer_blocks, carried[safe_at] != 0)
                                 : ArrayPath::kMpiIo);
  }
  return pending;
}

std::vector<std::pair<std::string, ArrayPath>> PendingCheckpointV3::array_paths() const {
  std::vector<std::pair<std::string, ArrayPath>> paths;
  for (std::size_t i = 0; i < description_.blobs.size(); ++i) {
    if (description_.blobs[i].kind == StorageKind::kGlobalArray) {
      paths.emplace_back(description_.blobs[i].name, paths_[i]);
    }
  }
  return paths;
}

std::vector<std::uint64_t> PendingCheckpointV3::array_checksum_offsets() const {
  const auto& described = description_.blobs;
  // After every node's per-node checksums and the replicated blobs' ones.
  std::uint64_t at = layout_.checksums_offset +
                     8 * (description_.ranks() * layout_.per_node_blobs +
                          static_cast<std::uint64_t>(std::count_if(
                              described.begin(), described.end(), [](const BlobDescription& blob) {
                                return blob.kind == StorageKind::kReplicated;
                              })));
  std::vector<std::uint64_t> offsets;
  for (const auto& blob : described) {
    offsets.push_back(blob.kind == StorageKind::kGlobalArray ? at : 0);
    if (blob.kind == StorageKind::kGlobalArray) {
      at += 8 * blob.writer_blocks.size();
    }
  }
  return offsets;
}

PendingCheckpointV3::ValueSums PendingCheckpointV3::write_values(int fd, StreamingWriter& writer) {
  const auto& described = description_.blobs;
  const std::uint64_t rank = static_cast<std::uint64_t>(comm_.rank());
  const std::uint64_t ranks = description_.ranks();
  const auto checksum_offsets = array_checksum_offsets();
  ValueSums sums;
  std::size_t ragged = 0;
  for (std::size_t i = 0; i < described.size(); ++i) {
    const auto& view = blobs_[i].view;
    const auto& where = described[i];
    switch (where.kind) {
      case StorageKind::kPerNode:
        sums.nodes.push_back(writer.write(
            layout_.packed[i]
                ? layout_.pack_offset + rank * layout_.pack_row_bytes + layout_.in_pack[i]
                : layout_.offsets[i] + rank * where.value_bytes(),
            view));
        bytes_written_ += view.bytes.size();
        break;
      case StorageKind::kRagged: {
        const auto offset = ragged_offsets_[ragged];
        sums.nodes.push_back(writer.write(layout_.offsets[i] + offset, view));
        bytes_written_ += view.bytes.size();
        write_at(
            fd, layout_.ragged_index_offset + (ragged * ranks + rank) * layout_.ragged_row_bytes,
            ragged_index_row(view.shape, description_.ragged_dimensions, offset, view.bytes.size()),
            file_.string());
        ++ragged;
        break;
      }
      case StorageKind::kReplicated:
        if (rank == 0) {
          sums.replicated.push_back(writer.write(layout_.offsets[i], view));
          bytes_written_ += view.bytes.size();
        }
        break;
      case StorageKind::kGlobalArray:
        if (paths_[i] == ArrayPath::kDirect) {
          // The same fault point as before the collective write: a trial reaches either path.
          fault_point("save-write-array", epoch_);
          // The block's run of elements, at its place in the dataset; an empty block writes
          // nothing but its checksum.
          const auto start = contiguous_start(where.shape, where.writer_blocks[rank]).value();
          const auto at = layout_.offsets[i] + start * element_size(where.dtype);
          sums.arrays.emplace_back(checksum_offsets[i] + 8 * rank, writer.write(at, view));
          sums.array_ranges.emplace_back(at, view.bytes.size());
          bytes_written_ += view.bytes.size();
        }
        break;  // otherwise write_arrays
    }
  }
  writer.flush();
  return sums;
}

bool PendingCheckpointV3::has_values_to_write() const {
  const auto& described = description_.blobs;
  for (std::size_t i = 0; i < described.size(); ++i) {
    switch (described[i].kind) {
      case StorageKind::kPerNode:
      case StorageKind::kRagged:
        return true;
      case StorageKind::kReplicated:
        if (comm_.rank() == 0) {
          return true;
        }
        break;
      case StorageKind::kGlobalArray:
        if (!written_collectively(i)) {
          return true;
        }
        break;
    }
  }
  return false;
}

void PendingCheckpointV3::write_data() noexcept {
  try {
    fault_point("save-create", epoch_);
    // A global array's block that goes out in write_arrays' collective write, which hashes it
    // but must not fail on one rank alone, is verified here when it was read from a copy, and a
    // mismatch fails the save in finish() like any other write. A directly written block is
    // verified as it streams, as every other blob is.
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      const auto& view = blobs_[i].view;
      if (written_collectively(i) && view.expected_xxh64 &&
          XXH64(view.bytes.data(), view.bytes.size(), 0) != *view.expected_xxh64) {
        throw Error(file_.string() + ": global array '" + view.name +
                    "' read back from its copy does not hash as it was made (the copy changed "
                    "since)");
      }
    }
    // A rank with nothing to write leaves the file alone. Opening it is not harmless on a network
    // file system: a client that looks a small file up while another host writes it may cache
    // its content as it was then and serve that from then on (GlusterFS's quick-read did, for
    // minutes, to a host whose rank had only opened the file); a client's own write drops its
    // cached copy, so every rank that does open the file writes to it.
    if (!has_values_to_write()) {
      fault_point("save-write", epoch_);
      return;
    }
    auto fd = open_regular_file_for_writing(file_);
    // A second, direct descriptor only when a blob will be written through it: opening it, and
    // its fsync and close, cost every rank of every save (at 96 ranks, a save of 64 KiB each).
    bool direct = false;
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      direct = direct ||
               (StreamingWriter::may_write_directly(blobs_[i].view) && !written_collectively(i));
    }
    auto direct_fd = direct ? open_for_direct_writing(file_) : FileDescriptor(-1);
    StreamingWriter writer(fd.get(), direct_fd.get(), file_.string());
    auto write_timer = std::make_optional<PhaseTimer>(phases_, SavePhase::kWrite);
    const auto sums = write_values(fd.get(), writer);
    write_timer.reset();
    if (writer.direct_bytes() > 0) {
      spdlog::debug("{}: {} of this rank's {} bytes written with direct I/O", file_.string(),
                    writer.direct_bytes(), bytes_written_);
    }
    // Each rank's checksums of its per-node values in one run of the table; rank 0's of the
    // replicated blobs after every node's.
    auto checksums_timer = std::make_optional<PhaseTimer>(phases_, SavePhase::kChecksums);
    if (!sums.nodes.empty()) {
      write_at(fd.get(), layout_.node_checksum_offset(static_cast<std::uint64_t>(comm_.rank()), 0),
               checksum_table(sums.nodes), file_.string());
    }
    if (!sums.replicated.empty()) {
      write_at(fd.get(),
               layout_.checksums_offset + 8 * description_.ranks() * layout_.per_node_blobs,
               checksum_table(sums.replicated), file_.string());
    }
    for (const auto& [at, sum] : sums.arrays) {
      write_at(fd.get(), at, checksum_table({sum}), file_.string());
    }
    checksums_timer.reset();
    fault_point("save-write", epoch_);
    // Made durable from this rank: on a parallel file system one client's fsync does not flush
    // another's cache. The direct descriptor's own fsync and close are checked too: a network
    // file system's write-behind may accept an O_DIRECT write and report its failure only there
    // (GlusterFS), and unchecked the save would commit without those bytes.
    const PhaseTimer fsync_timer(phases_, SavePhase::kFsync);
    if (direct_fd.valid()) {
      sync_file(direct_fd.get(), file_.string());
      direct_fd.close(file_.string());
    }
    sync_file(fd.get(), file_.string());
    // Only the clean pages go: bytes of another rank not yet durable stay.
    for (const auto& [offset, bytes] : sums.array_ranges) {
      drop_from_page_cache(fd.get(), offset, bytes);
    }
    fd.close(file_.string());
  } catch (...) {
    write_error_ = std::current_exception();
  }
}

void PendingCheckpointV3::write_arrays() {
  const auto& described = description_.blobs;
  bool any = false;
  for (std::size_t i = 0; i < described.size(); ++i) {
    any = any || written_collectively(i);
  }
  if (!any) {
    return;  // no collective open, write or sync: the data step wrote every array
  }
  // The collective calls follow one another with no agreement between them: the open, each
  // array's write with its checksum written beside it, the sync and the close. Every rank checked
  // its blocks in the describe step and opens the file whatever its data step did; a rank whose
  // fault point, write or sync fails from here on keeps the error and still makes every
  // collective call, and finish() agrees on it. An open that fails on one rank fails on every
  // rank under ROMIO, which agrees on the open's outcome inside MPI_File_open; under another
  // MPI-IO component (OMPIO leaves the other ranks in the collective write) an agreement after
  // the open stops the save everywhere first. At 96 ranks on 2 cores each agreement costs about
  // as much as the writes of a small array (docs/benchmarks.md, "The fixed cost at any rank
  // count").
  const auto rank = static_cast<std::size_t>(comm_.rank());
  // Each block's hash is known before the collective calls, so that its checksum goes into the
  // file before the collective write. No rank leaves that write before every rank has entered
  // it, so every checksum is in the page cache before any rank's fsync. Written after it, the
  // ranks' checksums dirtied the table's page again between the others' fsyncs, and each of
  // those fsyncs wrote it once more: at 96 ranks, sync and close took 33 ms against the bare
  // collective save's 21, and 24.5 written first (docs/benchmarks-history.md). Large blocks
  // are hashed on a thread of their own while the open and its agreement take place.
  // The hash phase holds what the save waited for: all of an inline hash, and of one on the
  // thread only what was left of it after the open.
  std::vector<std::uint64_t> sums(described.size());
  std::uint64_t collective_bytes = 0;
  for (std::size_t i = 0; i < described.size(); ++i) {
    collective_bytes += written_collectively(i) ? blobs_[i].view.bytes.size() : 0;
  }
  const auto hash_blocks = [&] {
    for (std::size_t i = 0; i < described.size(); ++i) {
      const auto& view = blobs_[i].view;
      if (written_collectively(i)) {
        sums[i] = view.xxh64 ? *view.xxh64 : XXH64(view.bytes.data(), view.bytes.size(), 0);
      }
    }
  };
  std::jthread hasher;
  if (collective_bytes >= kHashBesideFrom) {
    try {
      hasher = std::jthread(hash_blocks);
    } catch (const std::system_error&) {
      // No thread to spare: hashed here.
    }
  }
  if (!hasher.joinable()) {
    const auto hashing = std::chrono::steady_clock::now();
    hash_blocks();
    phases_.add(SavePhase::kHash, seconds_since(hashing));
  }
  const auto keep = [&] { write_error_ = write_error_ ? write_error_ : std::current_exception(); };
  std::optional<MpiIoFile> file;
  const auto open = [&] {
    for (std::size_t i = 0; i < described.size(); ++i) {
      if (written_collectively(i)) {
        try {
          fault_point("save-write-array", epoch_);
        } catch (...) {
          keep();
        }
      }
    }
    file.emplace(comm_, file_, MpiIoFile::Access::kWrite, arrays_.hints);
  };
  if (open_needs_agreement_) {
    agreed_step("open for collective writes", SavePhase::kWrite, false, open);
  } else {
    const auto opening = step_times::Clock::now();
    const PhaseTimer timer(phases_, SavePhase::kWrite);
    try {
      open();  // failed on every rank when it failed on one
    } catch (...) {
      created_.remove();
      rethrow_with_context(std::current_exception(), context_ + ": open for collective writes");
    }
    step_times::add_since("open for collective writes", opening);
  }
  if (hasher.joinable()) {
    const auto waiting = std::chrono::steady_clock::now();
    hasher.join();
    phases_.add(SavePhase::kHash, seconds_since(waiting));
  }
  const auto checksum_offsets = array_checksum_offsets();
  // The first failure of this rank, the data step's included, is the one finish() agrees on.
  // Each call in its own try: a rank whose checksum could not be written still makes the
  // collective write that every other rank makes.
  auto started = step_times::Clock::now();
  for (std::size_t i = 0; i < described.size(); ++i) {
    if (!written_collectively(i)) {
      continue;
    }
    const auto& where = described[i];
    const StoredArray stored{layout_.offsets[i], where.shape, element_size(where.dtype)};
    const PhaseTimer timer(phases_, SavePhase::kWrite);
    try {
      file->write_beside(checksum_offsets[i] + 8 * rank, checksum_table({sums[i]}));
    } catch (...) {
      keep();
    }
    try {
      write_block_collectively(*file, stored, where.writer_blocks[rank], blobs_[i].view.bytes,
                               phases_, sums[i]);
      bytes_written_ += blobs_[i].view.bytes.size();
    } catch (...) {
      keep();
    }
  }
  step_times::add_since("collective write", started);
  started = step_times::Clock::now();
  {
    const PhaseTimer timer(phases_, SavePhase::kFsync);
    try {
      file->sync_and_close();
    } catch (...) {
      keep();
    }
  }
  file.reset();
  step_times::add_since("sync and close", started);
}

void PendingCheckpointV3::finish() {
  agreed_step("write", SavePhase::kWaiting, false, [&] {
    if (write_error_) {
      std::rethrow_exception(write_error_);
    }
  });
  created_.keep();  // sealed at its lay-out, complete and durable on every rank now
}

}  // namespace epochrun
