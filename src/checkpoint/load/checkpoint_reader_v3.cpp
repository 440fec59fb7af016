#include "checkpoint_reader_v3.hpp"

#include "verified_read.hpp"

namespace epochrun {

CheckpointLayout layout_of_v3(const StoredFileV3& stored) {
  const auto& file = stored.description;
  CheckpointLayout layout;
  auto& header = layout.header;
  header.format_version = 3;
  header.epoch = file.epoch;
  header.job = file.job;
  header.node_names = file.node_names;
  header.config_json = file.config_json;
  layout.user_block_size = stored.layout.user_block_size;
  layout.extents = stored.layout.extents;
  // Looked up once: a file of many blobs asks for every node's lists once per blob.
  std::vector<std::vector<BlobRecord>*> records;
  std::vector<std::vector<std::uint64_t>*> offsets;
  std::vector<std::vector<bool>*> packed;
  for (const auto& node : file.node_names) {
    records.push_back(&header.blobs[node]);
    offsets.push_back(&layout.offsets[node]);
    packed.push_back(&layout.packed[node]);
  }
  const StoredValues where(stored);
  for (std::size_t i = 0; i < file.blobs.size(); ++i) {
    const auto& blob = file.blobs[i];
    switch (blob.kind) {
      case StorageKind::kPerNode:
      case StorageKind::kRagged:
        for (std::uint64_t rank = 0; rank < file.ranks(); ++rank) {
          auto value = where.at(i, rank);
          // A value of no bytes has no place (read_blob reads nothing at offset 0).
          offsets[rank]->push_back(value.record.byte_size() > 0 ? value.offset : 0);
          packed[rank]->push_back(value.packed);
          records[rank]->push_back(std::move(value.record));
        }
        break;
      case StorageKind::kReplicated:
        header.replicated.push_back(where.at(i, 0).record);
        break;
      case StorageKind::kGlobalArray:
        header.arrays.push_back(GlobalArrayRecord{blob.name, blob.dtype, blob.shape,
                                                  blob.writer_blocks, writer_checksums(stored, i)});
        break;
    }
  }
  return layout;
}

std::optional<std::size_t> find_blob_v3(const StoredFileV3& stored, const std::string& name,
                                        StorageKind kind) {
  const auto& blobs = stored.description.blobs;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (blobs[i].name == name && blobs[i].kind == kind) {
      return i;
    }
  }
  return std::nullopt;
}

Blob read_replicated_v3(int fd, const StoredFileV3& stored, std::size_t blob) {
  const auto value = stored_value(stored, blob, 0);
  return read_verified_blob(fd, value.record, value.offset,
                            "dataset " + dataset_path(stored.description.blobs.at(blob)));
}

std::uint64_t verify_replicated_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                                   std::span<std::byte> scratch) {
  const auto value = stored_value(stored, blob, 0);
  verify_stored_blob(fd, value.record, value.offset,
                     "dataset " + dataset_path(stored.description.blobs.at(blob)), scratch);
  return value.record.byte_size();
}

}  // namespace epochrun
