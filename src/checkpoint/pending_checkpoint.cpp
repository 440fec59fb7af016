#include "pending_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include "blob_index.hpp"
#include "blob_records.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "h5_objects.hpp"
#include "integrity_header.hpp"
#include "regular_file.hpp"
#include "staging_buffer.hpp"

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

// Lay-out step (rank 0): creates `file` with its final mode, refuses a checkpoint that cannot
// fit before anything is written (a write past the file-size limit would kill the process; a
// full disk half-way wastes the whole write), lays it out with serial HDF5 and reserves its
// space so that another process filling the disk meanwhile cannot fail it. The reservation
// comes after HDF5 has created the file: HDF5 creates by truncating, which gives back the
// space reserved before.
CheckpointLayout lay_out(const std::filesystem::path& file, CheckpointHeader header,
                         FileDescriptor& created) {
  const auto needed = estimated_file_bytes(header);
  const auto epoch = header.epoch;
  check_file_size_limit(needed);
  check_free_space(file.parent_path(), needed);
  created = create_new_file(file);
  return lay_out_checkpoint_file(created.get(), std::move(header), [&] {
    if (!reserve_space(created.get(), needed)) {
      spdlog::debug("{}: this file system cannot reserve space; relying on the free-space check",
                    file.string());
    }
    fault_point("save-lay-out", epoch);
  });
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

// Writes blobs at their offsets, each hashed while it streams (one pass: a piece is hashed
// while it is still in the CPU cache) unless its hash came with it. Large blobs go in pieces
// straight from their memory; small ones adjacent in the file (a pack) are gathered and
// written together. Every kWritebackBytes written through the page cache, it asks the kernel
// to start writing them to the disk (sync_file_range, no wait): the disk works while the next
// pieces are copied, instead of all at the final fsync (measured, docs/benchmarks.md: a 3 x
// 256 MiB save went from 1.35 to under 1 times a plain pwrite + fsync). A blob marked direct
// goes to `direct_fd` (O_DIRECT; -1: none) in its aligned part, the rest through the cache.
class StreamingWriter {
 public:
  StreamingWriter(int fd, int direct_fd, std::string what)
      : fd_(fd), direct_fd_(direct_fd), what_(std::move(what)) {}

  // Returns the blob's xxh64.
  std::uint64_t write(std::uint64_t offset, const BlobView& blob) {
    const auto bytes = blob.bytes;
    if (bytes.size() < kPiece) {
      if (!bytes.empty()) {
        if (!gathered_.empty() &&
            (gathered_at_ + gathered_.size() != offset || gathered_.size() >= kPiece)) {
          flush();
        }
        if (gathered_.empty()) {
          gathered_at_ = offset;
        }
        gathered_.insert(gathered_.end(), bytes.begin(), bytes.end());
      }
      return blob.xxh64 ? *blob.xxh64 : XXH64(bytes.data(), bytes.size(), 0);
    }
    flush();
    XXH64_reset(state_.get(), 0);
    std::size_t at = 0;
    if (blob.direct && direct_fd_ >= 0 && offset % kDirectIoAlignment == 0 &&
        reinterpret_cast<std::uintptr_t>(bytes.data()) % kDirectIoAlignment == 0) {
      at = write_direct(offset, bytes.first(bytes.size() / kDirectIoAlignment * kDirectIoAlignment),
                        !blob.xxh64);
    }
    for (; at < bytes.size(); at += kPiece) {
      const auto piece = bytes.subspan(at, std::min(kPiece, bytes.size() - at));
      if (!blob.xxh64) {
        XXH64_update(state_.get(), piece.data(), piece.size());
      }
      put(offset + at, piece);
    }
    return blob.xxh64 ? *blob.xxh64 : XXH64_digest(state_.get());
  }

  void flush() {
    if (!gathered_.empty()) {
      put(gathered_at_, gathered_);
      gathered_.clear();
    }
  }

  std::uint64_t direct_bytes() const { return direct_bytes_; }

 private:
  static constexpr std::size_t kPiece = 1 << 20;
  static constexpr std::size_t kDirectPiece = 8 << 20;
  static constexpr std::uint64_t kWritebackBytes = 8 << 20;

  void put(std::uint64_t offset, std::span<const std::byte> bytes) {
    write_at(fd_, offset, bytes, what_);
    if (pending_bytes_ == 0) {
      pending_from_ = offset;
      pending_to_ = offset;
    }
    pending_from_ = std::min(pending_from_, offset);
    pending_to_ = std::max(pending_to_, offset + bytes.size());
    pending_bytes_ += bytes.size();
    if (pending_bytes_ >= kWritebackBytes) {
      // Only a hint: where it is refused or fails, the fsync that ends the write still makes
      // every byte durable, and reports what failed.
      (void)::sync_file_range(fd_, static_cast<off_t>(pending_from_),
                              static_cast<off_t>(pending_to_ - pending_from_),
                              SYNC_FILE_RANGE_WRITE);
      pending_bytes_ = 0;
    }
  }

  // Writes `bytes` (aligned) with direct I/O, hashing them when asked; returns how many it
  // wrote: all of them, or fewer when the file system refuses direct I/O for them (EINVAL:
  // the caller writes the rest through the cache, and so does every later blob).
  std::size_t write_direct(std::uint64_t offset, std::span<const std::byte> bytes, bool hash) {
    std::size_t at = 0;
    while (at < bytes.size()) {
      const auto piece = bytes.subspan(at, std::min(kDirectPiece, bytes.size() - at));
      const ssize_t written =
          ::pwrite(direct_fd_, piece.data(), piece.size(), static_cast<off_t>(offset + at));
      if (written < 0 && errno == EINTR) {
        continue;
      }
      if (written < 0 && errno == EINVAL) {
        direct_fd_ = -1;
        return at;
      }
      if (written <= 0) {
        throw Error(errno_message("write " + what_ + " at byte " + std::to_string(offset + at)));
      }
      if (hash) {
        XXH64_update(state_.get(), piece.data(), static_cast<std::size_t>(written));
      }
      at += static_cast<std::size_t>(written);
      direct_bytes_ += static_cast<std::uint64_t>(written);
      if (at % kDirectIoAlignment != 0) {
        // A short direct write leaves the rest unaligned: the cache takes it.
        direct_fd_ = -1;
        return at;
      }
    }
    return at;
  }

  int fd_;
  int direct_fd_;
  std::string what_;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state_{XXH64_createState(),
                                                                    XXH64_freeState};
  std::vector<std::byte> gathered_;
  std::uint64_t gathered_at_ = 0;
  // Written through the cache since the last writeback hint: how many bytes, and their range.
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t pending_from_ = 0;
  std::uint64_t pending_to_ = 0;
  std::uint64_t direct_bytes_ = 0;
};

// The checksums as the file stores them: uint64 little-endian.
std::vector<std::byte> checksum_table(const std::vector<std::uint64_t>& sums) {
  std::vector<std::byte> table(8 * sums.size());
  std::memcpy(table.data(), sums.data(), table.size());
  return table;
}

}  // namespace

std::vector<BlobView> blob_views(const Workspace& workspace,
                                 const std::vector<std::string>& names) {
  std::vector<BlobView> views;
  views.reserve(names.size());
  // Names in the workspace's order (a job saves workspace.names()) are found by walking it
  // alongside, without a search each.
  const auto& blobs = workspace.blobs();
  auto next = blobs.begin();
  for (const auto& name : names) {
    const auto found = next != blobs.end() && next->first == name ? next : blobs.find(name);
    if (found == blobs.end()) {
      workspace.get(name);  // throws the UsageError naming the missing blob
    }
    const auto& blob = found->second;
    views.push_back(BlobView{name, blob.dtype(), blob.shape(), blob.raw(), std::nullopt, false});
    next = std::next(found);
  }
  return views;
}

template <typename Step>
void PendingCheckpoint::agreed_step(const std::string& step, bool root_only, Step&& body) {
  try {
    run_then_agree_within(comm_, context_ + ": " + step, timeout_, [&] {
      if (!root_only || rank_ == 0) {
        body();
      }
    });
  } catch (...) {
    created_ = FileDescriptor(-1);
    unsealed_.reset();  // removes it: gives the space of a failed attempt back
    throw;
  }
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
    try {
      pending.layout_ = lay_out(file, std::move(header), pending.created_);
    } catch (...) {
      if (pending.created_.valid()) {  // created, then failed
        pending.unsealed_.reset(new std::filesystem::path(file));
      }
      throw;
    }
    pending.unsealed_.reset(new std::filesystem::path(file));
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
  agreed_step("seal", true, [&] {
    seal_checkpoint_file(created_.get(), file_.string(), layout_.user_block_size, layout_.extents);
    release_space_beyond_end(created_.get());
    sync_file(created_.get(), file_.string());
    file_bytes_ = file_size(created_.get());
    created_.close(file_.string());
  });
  delete unsealed_.release();  // sealed: the file stays
}

void PendingCheckpoint::Unlinker::operator()(const std::filesystem::path* file) const {
  ::unlink(file->c_str());
  delete file;
}

}  // namespace epochrun
