#include "pending_checkpoint.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include "blob_index.hpp"
#include "blob_records.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "h5_objects.hpp"
#include "integrity_header.hpp"
#include "regular_file.hpp"
#include "streaming_writer.hpp"

namespace epochrun {
namespace {

// Blobs go to the file as their raw bytes, and the format stores them little-endian
// (docs/FORMAT.md).
static_assert(std::endian::native == std::endian::little,
              "checkpoint data is written as raw little-endian bytes");

// An upper bound of the file's size: the data plus a generous allowance for HDF5's metadata
// (measured: under 1 KiB per dataset and group; the index rows are counted exactly; the
// allowance is about twice that).
std::uint64_t estimated_file_bytes(const CheckpointHeader& header) {
  std::uint64_t bytes = 8192 + 2 * header.config_json.size();
  std::size_t blobs = 0;
  for (const auto& [node, records] : header.blobs) {
    const auto packed = packed_blobs(records);
    // Groups, index, pack, checksums.
    bytes += 4096 + 2 * node.size() + 2 * blob_index_bytes(records) + 8 * records.size();
    for (std::size_t i = 0; i < records.size(); ++i) {
      bytes += (packed[i] ? 0 : 1024) + 2 * records[i].name.size() + records[i].byte_size();
    }
    blobs += records.size();
  }
  return bytes + user_block_size_for(blobs + header.blobs.size());
}

// Describe step (every rank): this rank's blobs (their checksums come as they are written).
std::vector<BlobRecord> describe(const std::vector<BlobView>& blobs) {
  std::vector<BlobRecord> mine;
  mine.reserve(blobs.size());
  for (const auto& blob : blobs) {
    validate_name(blob.name, "blob name");
    if (blob.shape.size() > static_cast<std::size_t>(h5::kMaxDimensions)) {
      throw UsageError("blob '" + blob.name + "' has " + std::to_string(blob.shape.size()) +
                       " dimensions; a checkpoint holds at most " +
                       std::to_string(h5::kMaxDimensions));
    }
    BlobRecord record{blob.name, blob.dtype, blob.shape, 0};
    if (record.byte_size() != blob.bytes.size()) {
      throw UsageError("blob '" + blob.name + "' has " + std::to_string(blob.bytes.size()) +
                       " bytes for its shape's " + std::to_string(record.byte_size()));
    }
    mine.push_back(std::move(record));
  }
  return mine;
}

// Where every rank writes, flattened for a broadcast: for each rank in order, its blob count,
// its blobs' offsets, then its checksum table's offset (0 when it has no blobs).
std::vector<std::int64_t> flatten_offsets(const CheckpointLayout& layout) {
  std::vector<std::int64_t> flat;
  for (const auto& node : layout.header.node_names) {
    const auto& offsets = layout.offsets.at(node);
    flat.push_back(static_cast<std::int64_t>(offsets.size()));
    flat.insert(flat.end(), offsets.begin(), offsets.end());
    const auto checksums = layout.checksum_offsets.find(node);
    flat.push_back(checksums == layout.checksum_offsets.end()
                       ? 0
                       : static_cast<std::int64_t>(checksums->second));
  }
  return flat;
}

// This rank's blob offsets, then its checksum table's offset as the last element.
std::vector<std::uint64_t> offsets_of_rank(const std::vector<std::int64_t>& flat, int rank) {
  std::size_t at = 0;
  for (int skipped = 0; skipped < rank; ++skipped) {
    at += 2 + static_cast<std::size_t>(flat.at(at));
  }
  const auto count = static_cast<std::size_t>(flat.at(at));
  return {flat.begin() + static_cast<std::ptrdiff_t>(at + 1),
          flat.begin() + static_cast<std::ptrdiff_t>(at + 2 + count)};
}

}  // namespace

template <typename Step>
void PendingCheckpoint::agreed_step(const std::string& step, bool root_only, Step&& body) {
  created_.agreed_step(comm_, context_ + ": " + step, timeout_, root_only,
                       std::forward<Step>(body));
}

PendingCheckpoint PendingCheckpoint::begin(const std::filesystem::path& file,
                                           const Communicator& comm, CheckpointHeader header,
                                           std::vector<BlobView> blobs,
                                           std::chrono::duration<double> timeout) {
  PendingCheckpoint pending(file, comm, timeout);
  pending.context_ = "write checkpoint " + file.string();
  pending.rank_ = comm.rank();
  pending.epoch_ = header.epoch;
  pending.blobs_ = std::move(blobs);
  pending.agreed_step("describe", false, [&] {
    if (header.node_names.size() != static_cast<std::size_t>(comm.size())) {
      throw Error("header names " + std::to_string(header.node_names.size()) + " nodes for " +
                  std::to_string(comm.size()) + " ranks");
    }
    pending.records_ = describe(pending.blobs_);
  });
  auto descriptions = comm.gather(encode_records(pending.records_));

  pending.agreed_step("lay out", true, [&] {
    header.blobs.clear();
    for (std::size_t rank = 0; rank < descriptions.size(); ++rank) {
      const auto& bytes = descriptions[rank];
      header.blobs[header.node_names[rank]] = decode_records(bytes);
    }
    const auto needed = estimated_file_bytes(header);
    pending.layout_ = pending.created_.create_and_lay_out(
        file, needed, pending.epoch_, [&](int fd, const std::function<void()>& created) {
          return lay_out_checkpoint_file(fd, std::move(header), created);
        });
  });
  auto offsets = flatten_offsets(pending.layout_);
  comm.broadcast(offsets);
  pending.offsets_ = offsets_of_rank(offsets, pending.rank_);
  pending.checksums_offset_ = pending.offsets_.back();
  pending.offsets_.pop_back();
  return pending;
}

void PendingCheckpoint::write_data() noexcept {
  try {
    fault_point("save-create", epoch_);
    if (offsets_.size() != blobs_.size()) {
      throw Error("the layout has " + std::to_string(offsets_.size()) +
                  " datasets for this rank's " + std::to_string(blobs_.size()) + " blobs");
    }
    std::uint64_t end = 0;
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      end = std::max(end, offsets_[i] + blobs_[i].bytes.size());
    }
    check_file_size_limit(end);
    auto fd = open_regular_file_for_writing(file_);
    auto direct =
        std::any_of(blobs_.begin(), blobs_.end(), [](const BlobView& blob) { return blob.direct; })
            ? open_for_direct_writing(file_)
            : FileDescriptor(-1);
    StreamingWriter writer(fd.get(), direct.get(), file_.string());
    std::vector<std::uint64_t> sums;
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      sums.push_back(writer.write(offsets_[i], blobs_[i]));
      bytes_written_ += blobs_[i].bytes.size();
    }
    writer.flush();
    if (writer.direct_bytes() > 0) {
      spdlog::debug("{}: {} of this rank's {} bytes written with direct I/O", file_.string(),
                    writer.direct_bytes(), bytes_written_);
    }
    if (!sums.empty()) {
      write_at(fd.get(), checksums_offset_, checksum_table(sums), file_.string());
    }
    fault_point("save-write", epoch_);
    // Made durable from this rank: on a parallel file system one client's fsync does not
    // flush another's cache.
    sync_file(fd.get(), file_.string());
    fd.close(file_.string());
  } catch (...) {
    write_error_ = std::current_exception();
  }
}

void PendingCheckpoint::finish() {
  agreed_step("write", false, [&] {
    if (write_error_) {
      std::rethrow_exception(write_error_);
    }
  });
  agreed_step("seal", true,
              [&] { file_bytes_ = created_.seal(layout_.user_block_size, layout_.extents); });
}

}  // namespace epochrun
