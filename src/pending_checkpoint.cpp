#include "pending_checkpoint.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>

#include "blob_records.hpp"
#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "integrity_header.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

// Blobs go to the file as their raw bytes, and the format stores them little-endian
// (docs/FORMAT.md).
static_assert(std::endian::native == std::endian::little,
              "checkpoint data is written as raw little-endian bytes");

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

// Describe step (every rank): this rank's blobs, checksummed.
std::vector<BlobRecord> describe(const std::vector<BlobView>& blobs) {
  std::vector<BlobRecord> mine;
  for (const auto& blob : blobs) {
    validate_name(blob.name, "blob name");
    BlobRecord record{blob.name, blob.dtype, blob.shape, 0};
    if (record.byte_size() != blob.bytes.size()) {
      throw UsageError("blob '" + blob.name + "' has " + std::to_string(blob.bytes.size()) +
                       " bytes for its shape's " + std::to_string(record.byte_size()));
    }
    record.xxh64 = XXH64(blob.bytes.data(), blob.bytes.size(), 0);
    mine.push_back(std::move(record));
  }
  return mine;
}

// Lay-out step (rank 0): creates `file` with its final mode, refuses a checkpoint that cannot
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

}  // namespace

std::vector<BlobView> blob_views(const Workspace& workspace,
                                 const std::vector<std::string>& names) {
  std::vector<BlobView> views;
  views.reserve(names.size());
  for (const auto& name : names) {
    const auto& blob = workspace.get(name);
    views.push_back(BlobView{name, blob.dtype(), blob.shape(), blob.raw()});
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
  const auto description = records_to_json(pending.records_);
  auto descriptions = comm.gather(std::as_bytes(std::span(description)));

  pending.agreed_step("lay out", true, [&] {
    header.blobs.clear();
    for (std::size_t rank = 0; rank < descriptions.size(); ++rank) {
      const auto& bytes = descriptions[rank];
      header.blobs[header.node_names[rank]] =
          records_from_json(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    try {
      pending.layout_ = lay_out(file, header, pending.created_);
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
    for (std::size_t i = 0; i < blobs_.size(); ++i) {
      write_at(fd.get(), offsets_[i], blobs_[i].bytes, file_.string());
      bytes_written_ += blobs_[i].bytes.size();
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
    seal_checkpoint_file(created_.get(), file_.string(),
                         user_block_size_for(data_extent_count(layout_.header)),
                         data_extents(layout_));
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
