#include "epochrun/checkpoint_file.hpp"

#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <nlohmann/json.hpp>

#include "checkpoint_layout.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "integrity_header.hpp"
#include "json_text.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

// Blobs go to and come from the file as their raw bytes, and the format stores them
// little-endian (docs/FORMAT.md).
static_assert(std::endian::native == std::endian::little,
              "checkpoint data is written as raw little-endian bytes");

std::uint64_t checksum(std::span<const std::byte> data) {
  return XXH64(data.data(), data.size(), 0);
}

std::string dataset_path(const std::string& node, const std::string& blob) {
  return "/" + std::string(kNodesGroup) + "/" + node + "/" + blob;
}

// Records (and, when given, their offsets) as JSON, to travel between ranks.
std::string records_to_json(const std::vector<BlobRecord>& records,
                            const std::vector<std::uint64_t>& offsets = {}) {
  auto list = nlohmann::json::array();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    list.push_back({{"name", record.name},
                    {"dtype", dtype_name(record.dtype)},
                    {"shape", record.shape},
                    {"xxh64", record.xxh64},
                    {"offset", offsets.empty() ? 0 : offsets[i]}});
  }
  return json_text(list);
}

std::vector<BlobRecord> records_from_json(const std::string& text,
                                          std::vector<std::uint64_t>* offsets = nullptr) {
  std::vector<BlobRecord> records;
  for (const auto& entry : nlohmann::json::parse(text)) {
    records.push_back(BlobRecord{
        entry.at("name").get<std::string>(), parse_dtype(entry.at("dtype").get<std::string>()),
        entry.at("shape").get<Shape>(), entry.at("xxh64").get<std::uint64_t>()});
    if (offsets != nullptr) {
      offsets->push_back(entry.at("offset").get<std::uint64_t>());
    }
  }
  return records;
}

void check_checksum(std::uint64_t actual, const BlobRecord& record, const std::string& what) {
  if (actual != record.xxh64) {
    throw CorruptCheckpoint(what + ": checksum mismatch (stored xxh64 " +
                            std::to_string(record.xxh64) + ", data hashes to " +
                            std::to_string(actual) + ")");
  }
}

// Reads one blob's bytes at its offset and verifies them. Hashed piece by piece as they arrive,
// while each piece is still in the CPU cache (a second pass over a large blob would read it
// from memory again).
Blob read_blob_at(int fd, const BlobRecord& record, std::uint64_t offset, const std::string& what) {
  constexpr std::size_t kPiece = 4 << 20;
  Blob blob(record.dtype, record.shape);
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  auto bytes = blob.raw();
  try {
    for (std::size_t at = 0; at < bytes.size(); at += kPiece) {
      const auto piece = bytes.subspan(at, std::min(kPiece, bytes.size() - at));
      read_at(fd, offset + at, piece, what);
      XXH64_update(state.get(), piece.data(), piece.size());
    }
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& error) {
    throw CorruptCheckpoint(error.what());  // an unreadable checkpoint is not a usable one
  }
  check_checksum(XXH64_digest(state.get()), record, what);
  return blob;
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
    throw CheckpointMismatch("it was written by " + std::to_string(header.node_names.size()) +
                             " ranks, this run has " + std::to_string(expected.node_names.size()) +
                             " (restarting on a different rank count is not supported yet)");
  }
  if (header.node_names != expected.node_names) {
    throw CheckpointMismatch("its node names differ from this run's");
  }
}

std::vector<DataExtent> data_extents(const CheckpointLayout& layout) {
  std::vector<DataExtent> extents;
  for (const auto& [node, records] : layout.header.blobs) {
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (records[i].byte_size() > 0) {
        extents.push_back(DataExtent{layout.offsets.at(node)[i], records[i].byte_size()});
      }
    }
  }
  return extents;
}

std::uint64_t data_extent_count(const CheckpointHeader& header) {
  std::uint64_t count = 0;
  for (const auto& [node, records] : header.blobs) {
    count += static_cast<std::uint64_t>(std::count_if(
        records.begin(), records.end(), [](const BlobRecord& r) { return r.byte_size() > 0; }));
  }
  return count;
}

// An upper bound of the file's size: the data plus a generous allowance for HDF5's metadata
// (measured: under 1 KiB per dataset and group; the allowance is about twice that).
std::uint64_t estimated_file_bytes(const CheckpointHeader& header) {
  std::uint64_t bytes =
      8192 + 2 * header.config_json.size() + user_block_size_for(data_extent_count(header));
  for (const auto& [node, records] : header.blobs) {
    bytes += 1024 + 2 * node.size();
    for (const auto& record : records) {
      bytes += 1024 + 2 * record.name.size() + record.byte_size();
    }
  }
  return bytes;
}

// Save step a (every rank): this rank's blobs, checksummed.
std::vector<BlobRecord> describe_blobs(const Workspace& workspace,
                                       const std::vector<std::string>& blob_names) {
  std::vector<BlobRecord> mine;
  for (const auto& name : blob_names) {
    validate_name(name, "blob name");
    const auto& blob = workspace.get(name);
    mine.push_back(BlobRecord{name, blob.dtype(), blob.shape(), checksum(blob.raw())});
  }
  return mine;
}

// Save step b (rank 0): creates `file` with its final mode, refuses a checkpoint that cannot
// fit before anything is written (a write past the file-size limit would kill the process; a
// full disk half-way wastes the whole write), reserves its space so that another process
// filling the disk meanwhile cannot fail it, and lays it out with serial HDF5.
CheckpointLayout lay_out(const std::filesystem::path& file, const CheckpointHeader& header,
                         FileDescriptor& created) {
  const auto needed = estimated_file_bytes(header);
  check_file_size_limit(needed);
  check_free_space(file.parent_path(), needed);
  created = create_new_file(file);
  if (!reserve_space(created.get(), needed)) {
    spdlog::debug("{}: this file system cannot reserve space; relying on the free-space check",
                  file.string());
  }
  return lay_out_checkpoint_file(created.get(), header,
                                 user_block_size_for(data_extent_count(header)));
}

// The offsets of every rank's blobs, flattened for a broadcast: for each rank in order, its
// blob count, then its offsets.
std::vector<std::int64_t> flatten_offsets(const CheckpointLayout& layout) {
  std::vector<std::int64_t> flat;
  for (const auto& node : layout.header.node_names) {
    const auto& offsets = layout.offsets.at(node);
    flat.push_back(static_cast<std::int64_t>(offsets.size()));
    flat.insert(flat.end(), offsets.begin(), offsets.end());
  }
  return flat;
}

std::vector<std::uint64_t> offsets_of_rank(const std::vector<std::int64_t>& flat, int rank) {
  std::size_t at = 0;
  for (int skipped = 0; skipped < rank; ++skipped) {
    at += 1 + static_cast<std::size_t>(flat.at(at));
  }
  const auto count = static_cast<std::size_t>(flat.at(at));
  return {flat.begin() + static_cast<std::ptrdiff_t>(at + 1),
          flat.begin() + static_cast<std::ptrdiff_t>(at + 1 + count)};
}

// Save step c (every rank): this rank's blobs, each at its dataset's offset, made durable
// from this rank (on a parallel file system one client's fsync does not flush another's cache).
void write_blobs(const std::filesystem::path& file, std::int64_t epoch,
                 const std::vector<BlobRecord>& mine, const std::vector<std::uint64_t>& offsets,
                 const Workspace& workspace) {
  fault_point("save-create", epoch);
  if (offsets.size() != mine.size()) {
    throw Error("the layout has " + std::to_string(offsets.size()) + " datasets for this rank's " +
                std::to_string(mine.size()) + " blobs");
  }
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    end = std::max(end, offsets[i] + mine[i].byte_size());
  }
  check_file_size_limit(end);
  auto fd = open_regular_file_for_writing(file);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    write_at(fd.get(), offsets[i], workspace.get(mine[i].name).raw(), file.string());
  }
  fault_point("save-write", epoch);
  sync_file(fd.get(), file.string());
  fd.close(file.string());
}

// Save step d (rank 0): the integrity header, the unused reservation given back, fsync.
void seal(const std::filesystem::path& file, FileDescriptor& created,
          const CheckpointLayout& layout) {
  seal_checkpoint_file(created.get(), file.string(),
                       user_block_size_for(data_extent_count(layout.header)), data_extents(layout));
  release_space_beyond_end(created.get());
  sync_file(created.get(), file.string());
  created.close(file.string());
}

}  // namespace

std::uint64_t CheckpointHeader::total_blob_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [node, records] : blobs) {
    for (const auto& record : records) {
      total += record.byte_size();
    }
  }
  return total;
}

void write_checkpoint_file(const std::filesystem::path& file, const Communicator& comm,
                           CheckpointHeader header, const Workspace& workspace,
                           const std::vector<std::string>& blob_names,
                           std::chrono::duration<double> timeout) {
  const std::string context = "write checkpoint " + file.string();
  std::vector<BlobRecord> mine;
  run_then_agree_within(comm, context + ": describe", timeout, [&] {
    if (header.node_names.size() != static_cast<std::size_t>(comm.size())) {
      throw Error("header names " + std::to_string(header.node_names.size()) + " nodes for " +
                  std::to_string(comm.size()) + " ranks");
    }
    mine = describe_blobs(workspace, blob_names);
  });
  const auto description = records_to_json(mine);
  auto descriptions = comm.gather(std::as_bytes(std::span(description)));

  FileDescriptor created(-1);  // rank 0's, from creation to seal
  CheckpointLayout layout;
  run_on_root_then_agree_within(comm, context + ": lay out", timeout, [&] {
    header.blobs.clear();
    for (std::size_t rank = 0; rank < descriptions.size(); ++rank) {
      const auto& bytes = descriptions[rank];
      header.blobs[header.node_names[rank]] =
          records_from_json(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    layout = lay_out(file, header, created);
  });
  auto offsets = flatten_offsets(layout);
  comm.broadcast(offsets);

  run_then_agree_within(comm, context + ": write", timeout, [&] {
    write_blobs(file, header.epoch, mine, offsets_of_rank(offsets, comm.rank()), workspace);
  });
  run_on_root_then_agree_within(comm, context + ": seal", timeout,
                                [&] { seal(file, created, layout); });
}

std::vector<std::string> read_checkpoint_file(const std::filesystem::path& file,
                                              const Communicator& comm,
                                              const CheckpointExpectation& expected,
                                              Workspace& workspace,
                                              std::chrono::duration<double> timeout) {
  const std::string context = "checkpoint " + file.string();
  // Rank 0 verifies the whole file but its data before anyone reads a byte of data: the
  // integrity header before libhdf5 parses anything, then every dataset's layout.
  std::string records_by_rank;  // a JSON array, index = rank
  run_on_root_then_agree_within(comm, context, timeout, [&] {
    auto fd = open_regular_file_for_reading(file);
    const auto layout = read_checkpoint_layout(fd.get(), verify_checkpoint_file(fd.get(), context));
    check_expectation(layout.header, expected);
    auto list = nlohmann::json::array();
    for (const auto& node : layout.header.node_names) {
      list.push_back(records_to_json(layout.header.blobs.at(node), layout.offsets.at(node)));
    }
    records_by_rank = json_text(list);
  });
  comm.broadcast(records_by_rank);
  const auto mine =
      nlohmann::json::parse(records_by_rank).at(static_cast<std::size_t>(comm.rank()));

  // Each rank reads its own node's blobs.
  std::vector<std::pair<std::string, Blob>> loaded;
  run_then_agree_within(comm, context, timeout, [&] {
    std::vector<std::uint64_t> offsets;
    const auto records = records_from_json(mine.get<std::string>(), &offsets);
    const auto& node = expected.node_names[static_cast<std::size_t>(comm.rank())];
    auto fd = open_regular_file_for_reading(file);
    for (std::size_t i = 0; i < records.size(); ++i) {
      loaded.emplace_back(records[i].name,
                          read_blob_at(fd.get(), records[i], offsets[i],
                                       "dataset " + dataset_path(node, records[i].name)));
    }
  });

  std::vector<std::string> names;
  for (auto& [name, blob] : loaded) {
    workspace.put(name, std::move(blob));
    names.push_back(name);
  }
  return names;
}

struct CheckpointReader::Impl {
  std::filesystem::path file;
  FileDescriptor fd{-1};
  std::uint64_t file_bytes = 0;
  CheckpointLayout layout;
};

CheckpointReader::CheckpointReader(const std::filesystem::path& file)
    : impl_(std::make_unique<Impl>()) {
  impl_->file = file;
  try {
    impl_->fd = open_regular_file_for_reading(file);
    const auto integrity = verify_checkpoint_file(impl_->fd.get(), file.string());
    impl_->file_bytes = integrity.file_size;
    impl_->layout = read_checkpoint_layout(impl_->fd.get(), integrity);
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

bool CheckpointReader::has_blob(const std::string& node, const std::string& blob) const {
  auto found = header().blobs.find(node);
  if (found == header().blobs.end()) {
    return false;
  }
  return std::any_of(found->second.begin(), found->second.end(),
                     [&](const BlobRecord& record) { return record.name == blob; });
}

Blob CheckpointReader::read_blob(const std::string& node, const std::string& blob) const {
  const std::string context = "checkpoint " + impl_->file.string();
  auto found = header().blobs.find(node);
  if (found == header().blobs.end()) {
    throw CheckpointError(context + ": it has no node '" + node + "'");
  }
  auto record = std::find_if(found->second.begin(), found->second.end(),
                             [&](const BlobRecord& entry) { return entry.name == blob; });
  if (record == found->second.end()) {
    throw CheckpointError(context + ": node '" + node + "' has no blob '" + blob + "'");
  }
  const auto offset =
      impl_->layout.offsets.at(node)[static_cast<std::size_t>(record - found->second.begin())];
  try {
    return read_blob_at(impl_->fd.get(), *record, offset, "dataset " + dataset_path(node, blob));
  } catch (...) {
    rethrow_with_context(std::current_exception(), context);
  }
}

}  // namespace epochrun
