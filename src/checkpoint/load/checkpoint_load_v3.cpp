#include "checkpoint_load_v3.hpp"

#include <cstring>
#include <optional>

#include "checkpoint_judge.hpp"
#include "checkpoint_layout_v3.hpp"
#include "collective_errors.hpp"
#include "epochrun/errors.hpp"
#include "global_array_io.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"
#include "stored_file_codec.hpp"
#include "verified_read.hpp"

namespace epochrun {
namespace {

bool is_per_node(StorageKind kind) {
  return kind == StorageKind::kPerNode || kind == StorageKind::kRagged;
}

// CheckpointMismatch when the file is not the one the run asks for, or when the rank count
// changed and a per-node blob has no rule (all such blobs named in one line).
void check_request(const StoredFileV3& stored, const LoadRequest& request, int ranks) {
  const auto& file = stored.description;
  if (file.epoch != request.epoch) {
    throw CorruptCheckpoint("the file is named for epoch " + std::to_string(request.epoch) +
                            " but records epoch " + std::to_string(file.epoch));
  }
  if (file.job != request.job) {
    throw CheckpointMismatch("it belongs to job '" + file.job + "', this run is job '" +
                             request.job + "'");
  }
  if (file.ranks() == static_cast<std::uint64_t>(ranks)) {
    return;
  }
  std::string refused;
  for (const auto& blob : file.blobs) {
    if (is_per_node(blob.kind) && !request.per_node_rules.contains(blob.name)) {
      refused += (refused.empty() ? "'" : ", '") + blob.name + "'";
    }
  }
  if (!refused.empty()) {
    throw CheckpointMismatch("it was written by " + std::to_string(file.ranks()) +
                             " ranks, this run has " + std::to_string(ranks) +
                             ", and the job gives no rule for a rank change to its per-node "
                             "blobs " +
                             refused +
                             " (declare them with a RankChange: redistribute_with or recreate)");
  }
}

// One rank's per-node, ragged and replicated values, read and verified: the values it
// keeps as they are (its own and the replicated ones) in one read_verified_blobs, where its
// packed small blobs are a few reads; at another rank count, each blob's old values one blob at
// a time, so that only one blob's are in memory beside the job's.
std::vector<std::pair<std::string, Blob>> read_values(int fd, const StoredFileV3& stored,
                                                      const LoadRequest& request,
                                                      const Communicator& comm,
                                                      std::vector<std::string>& recreated) {
  const auto& blobs = stored.description.blobs;
  const bool same_ranks = stored.description.ranks() == static_cast<std::uint64_t>(comm.size());
  const StoredValues where(stored);
  const auto as_is = [&](const BlobDescription& blob) {
    return blob.kind == StorageKind::kReplicated || (is_per_node(blob.kind) && same_ranks);
  };
  // Value k of a read is blob blob_of[k]'s value of node rank_of[k].
  struct Read {
    std::vector<std::size_t> blob_of;
    std::vector<std::uint64_t> rank_of;
    std::vector<BlobRecord> records;
    std::vector<std::uint64_t> offsets;
    void add(const StoredValues& where, std::size_t i, std::uint64_t rank) {
      auto value = where.at(i, rank);
      blob_of.push_back(i);
      rank_of.push_back(rank);
      records.push_back(std::move(value.record));
      offsets.push_back(value.offset);
    }
  };
  const auto read = [&](const Read& wanted) {
    return read_verified_blobs(fd, wanted.records, wanted.offsets, [&](std::size_t k) {
      // As h5py addresses it: f["nodes/<blob>"][rank] is node `rank`'s value.
      const auto& blob = blobs[wanted.blob_of[k]];
      const auto rank = wanted.rank_of[k];
      return dataset_path(blob) + (is_per_node(blob.kind)
                                       ? "[" + std::to_string(rank) + "] (" +
                                             stored.description.node_names.at(rank) + ")"
                                       : "");
    });
  };
  Read kept;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (as_is(blobs[i])) {
      kept.add(
          where, i,
          blobs[i].kind == StorageKind::kReplicated ? 0 : static_cast<std::uint64_t>(comm.rank()));
    }
  }
  auto kept_values = read(kept);
  std::vector<std::pair<std::string, Blob>> values;
  std::size_t next_kept = 0;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    const auto& blob = blobs[i];
    if (as_is(blob)) {
      values.emplace_back(blob.name, std::move(kept_values[next_kept++]));
    } else if (is_per_node(blob.kind)) {
      const auto& rule = request.per_node_rules.at(blob.name);
      if (!rule.load) {
        recreated.push_back(blob.name);
        continue;
      }
      Read old;
      for (std::uint64_t rank = 0; rank < stored.description.ranks(); ++rank) {
        old.add(where, i, rank);
      }
      values.emplace_back(blob.name, rule.redistribute(read(old), comm.rank(), comm.size()));
    }
  }
  return values;
}

// Each global array, collectively: the writer blocks verified, then redistributed into the
// blocks the loading ranks want.
void read_arrays(const std::filesystem::path& file, const StoredFileV3& stored,
                 const LoadRequest& request, const Communicator& comm, const std::string& context,
                 std::chrono::duration<double> timeout,
                 std::vector<std::pair<std::string, Blob>>& values) {
  const auto& blobs = stored.description.blobs;
  std::optional<MpiIoFile> opened;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    const auto& blob = blobs[i];
    if (blob.kind != StorageKind::kGlobalArray) {
      continue;
    }
    if (!opened) {
      run_then_agree_within(comm, context + ": open for collective reads", timeout, [&] {
        opened.emplace(comm, file, MpiIoFile::Access::kRead, request.hints);
      });
    }
    std::vector<Block> wanted;
    const auto found = request.array_blocks.find(blob.name);
    if (found != request.array_blocks.end()) {
      wanted = found->second;
    } else {
      for (int rank = 0; rank < comm.size(); ++rank) {
        wanted.push_back(balanced_block(blob.shape, comm.size(), rank));
      }
    }
    run_then_agree_within(comm, context + ": global array '" + blob.name + "'", timeout, [&] {
      if (wanted.size() != static_cast<std::size_t>(comm.size()) ||
          wanted[static_cast<std::size_t>(comm.rank())].count.size() != blob.shape.size()) {
        throw CheckpointMismatch("global array '" + blob.name + "' is " +
                                 shape_to_string(blob.shape) +
                                 " there; the job's blocks have other dimensions");
      }
      check_tiling(blob.name, blob.shape, wanted);
    });
    const StoredGlobalArray array{
        blob.name, StoredArray{stored.layout.offsets[i], blob.shape, element_size(blob.dtype)},
        blob.writer_blocks, writer_checksums(stored, i)};
    Blob mine(blob.dtype, wanted[static_cast<std::size_t>(comm.rank())].count);
    read_global_array(comm, *opened, array, wanted, mine.raw(), context, timeout);
    values.emplace_back(blob.name, std::move(mine));
  }
  if (opened) {
    opened->close();
  }
}

}  // namespace

void read_layout_for_load(const std::filesystem::path& file, const LoadRequest& request, int ranks,
                          std::int64_t& version, RootLayout& root) {
  FileDescriptor fd(-1);
  try {
    fd = open_regular_file_for_reading(file);
  } catch (...) {
    rethrow_with_context(std::current_exception(), "checkpoint " + file.string());
  }
  read_layout_for_load(fd.get(), file, request, ranks, version, root);
}

void read_layout_for_load(int fd, const std::filesystem::path& file, const LoadRequest& request,
                          int ranks, std::int64_t& version, RootLayout& root) {
  const std::string context = "checkpoint " + file.string();
  try {
    auto judged = judge_checkpoint(fd, context);
    version = judged.format_version;
    root.stored = std::move(judged.v3);
    if (root.stored) {
      check_request(*root.stored, request, ranks);
      root.bytes = encode_stored_file(*root.stored);
      root.carried[0] = static_cast<std::int64_t>(root.bytes.size());
      if (root.bytes.size() <= 8 * (RootLayout::kCarriedWords - 1)) {
        std::memcpy(root.carried.data() + 1, root.bytes.data(), root.bytes.size());
      }
    }
  } catch (...) {
    rethrow_with_context(std::current_exception(), context);
  }
}

std::optional<StoredFileV3> share_layout(const Communicator& comm, RootLayout& root) {
  const auto size = static_cast<std::size_t>(root.carried[0]);
  // A version 3 layout is never empty: none is a file of version 1 or 2.
  if (size == 0) {
    return std::nullopt;
  }
  const bool carried = size <= 8 * (RootLayout::kCarriedWords - 1);
  if (comm.is_root()) {
    if (!carried) {
      comm.broadcast(std::span(root.bytes));
    }
    return std::move(root.stored);
  }
  root.bytes.resize(size);
  if (carried) {
    std::memcpy(root.bytes.data(), root.carried.data() + 1, size);
  } else {
    comm.broadcast(std::span(root.bytes));
  }
  return decode_stored_file(root.bytes);
}

Loaded load_checkpoint_v3(const std::filesystem::path& file, const Communicator& comm,
                          const LoadRequest& request, Workspace& workspace,
                          std::chrono::duration<double> timeout) {
  RootLayout root;
  {
    const step_times::Named step("read the layout");
    run_on_root_then_agree_within(
        comm, "load " + file.string(), timeout,
        [&] {
          std::int64_t version = 0;
          read_layout_for_load(file, request, comm.size(), version, root);
          if (!root.stored) {
            throw CheckpointMismatch("checkpoint " + file.string() + ": format version " +
                                     std::to_string(version) + " is not version 3");
          }
        },
        std::span(root.carried));
  }
  const auto stored = share_layout(comm, root);
  return load_values_v3(file, comm, request, workspace, timeout, *stored);
}

Loaded load_values_v3(const std::filesystem::path& file, const Communicator& comm,
                      const LoadRequest& request, Workspace& workspace,
                      std::chrono::duration<double> timeout, const StoredFileV3& stored,
                      FileDescriptor opened) {
  // Rank 0 verified the integrity header and read the layout (the metadata, once), and every
  // rank got what it found in one broadcast: each rank's own share is its values alone,
  // whatever the rank count. Every byte a rank reads is checked against the checksums rank 0
  // read, so a file system that shows a rank on another host other bytes fails the load.
  const std::string context = "checkpoint " + file.string();
  std::vector<std::pair<std::string, Blob>> values;
  std::vector<std::string> recreated;
  {
    const step_times::Named step("read and verify");
    run_then_agree_within(comm, context, timeout, [&] {
      auto fd = opened.valid() ? std::move(opened) : open_regular_file_for_reading(file);
      values = read_values(fd.get(), stored, request, comm, recreated);
    });
  }
  read_arrays(file, stored, request, comm, context, timeout, values);
  auto loaded = put_loaded_values(std::move(values), stored, workspace);
  loaded.recreated = std::move(recreated);
  return loaded;
}

Loaded put_loaded_values(std::vector<std::pair<std::string, Blob>> values,
                         const StoredFileV3& stored, Workspace& workspace) {
  Loaded loaded;
  loaded.written_by_ranks = static_cast<std::int64_t>(stored.description.ranks());
  loaded.config_json = stored.description.config_json;
  for (auto& [name, blob] : values) {
    workspace.put(name, std::move(blob));
    loaded.blobs.push_back(name);
  }
  return loaded;
}

}  // namespace epochrun
