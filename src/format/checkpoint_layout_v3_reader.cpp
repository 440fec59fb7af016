// Reading version 3 checkpoints (docs/FORMAT.md, "Format version 3") from an untrusted file: the
// blob index, then each blob's dataset checked against its row, the global arrays' writer blocks,
// the pack, the ragged index and the checksum table -- all before any blob byte is read.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "blob_index.hpp"
#include "checkpoint_layout.hpp"
#include "checkpoint_layout_internal.hpp"
#include "checkpoint_layout_readers.hpp"
#include "checkpoint_layout_v3.hpp"
#include "checkpoint_root_attributes.hpp"
#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "h5_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_library.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"
#include "stored_file_codec.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// What the reader walks: the open file, its size, and what it found so far.
struct Reading {
  hid_t file;
  std::uint64_t file_bytes;
  StoredFileV3& stored;
  // The groups of the blobs' datasets ("nodes", "replicated", "arrays"), each opened once as a
  // hard link of a group: a dataset is looked up inside its group, never through a path whose
  // soft or external links HDF5 would follow (into another file, for an external one).
  std::map<std::string, Handle> groups;

  hid_t group(const std::string& name) {
    auto found = groups.find(name);
    if (found == groups.end()) {
      found = groups.emplace(name, h5::open_child(file, name, false, "group /" + name)).first;
    }
    return found->second.get();
  }
};

// The dataset's shape as the blob's row says it must be.
Shape dataset_shape(const BlobDescription& blob, std::uint64_t ranks) {
  Shape shape = blob.shape;
  if (blob.kind == StorageKind::kPerNode) {
    shape.insert(shape.begin(), ranks);
  } else if (blob.kind == StorageKind::kRagged) {
    shape = {blob.ragged_elements};
  }
  return shape;
}

// A global array's writer blocks, from its attributes; they must tile its shape exactly.
std::vector<Block> read_writer_blocks(hid_t dataset, const BlobDescription& blob,
                                      const std::string& what) {
  const std::uint64_t dimensions = blob.shape.size();
  if (dimensions == 0) {
    throw CorruptCheckpoint(what + " is a global array of no dimension");
  }
  auto space = [&](const char* name) {
    // The writer count is the attribute's own first extent, bounded by what the file can hold.
    auto attribute =
        Handle(H5Aopen(dataset, name, H5P_DEFAULT), "open attribute " + std::string(name));
    Handle extent(H5Aget_space(attribute.get()), "get space of attribute " + std::string(name));
    hsize_t dims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(extent.get()) != 2) {
      throw CorruptCheckpoint(what + ": attribute '" + name + "' is not a table");
    }
    H5Sget_simple_extent_dims(extent.get(), dims, nullptr);
    return dims[0];
  };
  const std::uint64_t writers =
      read_or_corrupt([&] { return space("epochrun_block_starts"); }, what + ": ");
  const auto starts =
      h5::read_uint_table_attribute(dataset, "epochrun_block_starts", writers, dimensions);
  const auto counts =
      h5::read_uint_table_attribute(dataset, "epochrun_block_counts", writers, dimensions);
  std::vector<Block> blocks;
  for (std::uint64_t w = 0; w < writers; ++w) {
    blocks.push_back(
        Block{Shape(starts.begin() + static_cast<std::ptrdiff_t>(w * dimensions),
                    starts.begin() + static_cast<std::ptrdiff_t>((w + 1) * dimensions)),
              Shape(counts.begin() + static_cast<std::ptrdiff_t>(w * dimensions),
                    counts.begin() + static_cast<std::ptrdiff_t>((w + 1) * dimensions))});
  }
  read_or_corrupt([&] { check_tiling(blob.name, blob.shape, blocks); }, what + ": ");
  return blocks;
}

// The blob's dataset: checked against its row, its extent added; returns its offset.
std::uint64_t read_blob_dataset(Reading& reading, BlobDescription& blob) {
  const auto path = dataset_path(blob);  // /<group>/<blob>
  const std::string what = "dataset " + path;
  const auto ranks = reading.stored.description.ranks();
  auto dataset = h5::open_child(reading.group(path.substr(1, path.size() - blob.name.size() - 2)),
                                blob.name, true, what);
  h5::check_storage(dataset.get(), what);
  if (h5::dtype_of(dataset.get(), what) != blob.dtype ||
      h5::shape_of(dataset.get(), what) != dataset_shape(blob, ranks)) {
    throw CorruptCheckpoint(what + " does not have the dtype and shape its index row says");
  }
  if (blob.kind == StorageKind::kGlobalArray) {
    blob.writer_blocks = read_writer_blocks(dataset.get(), blob, what);
  }
  const std::uint64_t bytes = element_count(dataset_shape(blob, ranks)) * element_size(blob.dtype);
  if (bytes == 0) {
    return 0;
  }
  const auto offset = h5::offset_of(dataset.get(), what);
  reading.stored.layout.extents.push_back(DataExtent{offset, bytes});
  return offset;
}

// The blob index: one description per row, its size checked against its dtype and shape.
void read_index(Reading& reading, hid_t index) {
  const std::string what = "blob index /index/blobs";
  auto rows = read_blob_index(h5::open_child(index, "blobs", true, what).get(), what,
                              reading.file_bytes, IndexColumns::kWithKind);
  const auto ranks = reading.stored.description.ranks();
  auto& layout = reading.stored.layout;
  for (auto& row : rows) {
    BlobDescription blob{std::move(row.name), row.kind, row.dtype, std::move(row.shape), 0, {}};
    if (blob.kind == StorageKind::kRagged) {
      if (!blob.shape.empty() || row.size % element_size(blob.dtype) != 0) {
        throw CorruptCheckpoint(what + ": ragged blob '" + blob.name +
                                "' has a shape or a size "
                                "that is not whole elements");
      }
      blob.ragged_elements = row.size / element_size(blob.dtype);
    }
    const BlobRecord record{blob.name, blob.dtype, dataset_shape(blob, ranks), 0};
    const auto bytes = checked_byte_size(record, reading.file_bytes, [&] { return what; });
    const auto per_value =
        blob.kind == StorageKind::kPerNode ? bytes / std::max<std::uint64_t>(ranks, 1) : bytes;
    if (row.size != per_value || (row.packed && blob.kind != StorageKind::kPerNode)) {
      throw CorruptCheckpoint(what + ": blob '" + blob.name + "' says " + std::to_string(row.size) +
                              " bytes, its dtype and shape " + std::to_string(per_value));
    }
    layout.packed.push_back(row.packed);
    layout.in_pack.push_back(row.packed ? row.offset : 0);
    layout.per_node_blobs +=
        blob.kind == StorageKind::kPerNode || blob.kind == StorageKind::kRagged ? 1 : 0;
    reading.stored.description.blobs.push_back(std::move(blob));
  }
}

// A uint64 (or compound) dataset of `rows` rows under /index, outside every data extent;
// returns its offset (0 when empty).
std::uint64_t index_table_offset(hid_t dataset, std::uint64_t rows, std::uint64_t row_bytes,
                                 const std::string& what, const Reading& reading) {
  h5::check_storage(dataset, what);
  if (h5::shape_of(dataset, what) != Shape{rows}) {
    throw CorruptCheckpoint(what + " does not have the " + std::to_string(rows) +
                            " rows its index needs");
  }
  const auto offset = rows > 0 ? h5::offset_of(dataset, what) : 0;
  const auto bytes = rows * row_bytes;
  if (bytes > reading.file_bytes || offset > reading.file_bytes - bytes) {
    throw CorruptCheckpoint(what + " lies outside the file");
  }
  return offset;
}

void read_checksums(Reading& reading, hid_t index) {
  auto& stored = reading.stored;
  std::uint64_t rows = stored.description.ranks() * stored.layout.per_node_blobs;
  for (const auto& blob : stored.description.blobs) {
    rows += blob.kind == StorageKind::kReplicated    ? 1
            : blob.kind == StorageKind::kGlobalArray ? blob.writer_blocks.size()
                                                     : 0;
  }
  if (rows == 0) {
    return;
  }
  const std::string what = "checksum table /index/xxh64";
  auto dataset = h5::open_child(index, "xxh64", true, what);
  Handle type(H5Dget_type(dataset.get()), "get type of " + what);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) != 8) {
    throw CorruptCheckpoint(what + " is not a uint64 table");
  }
  stored.layout.checksums_offset = index_table_offset(dataset.get(), rows, 8, what, reading);
  stored.checksums.resize(rows);
  h5::check(H5Dread(dataset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                    stored.checksums.data()),
            "read " + what);
}

// The pack, when the index packs any blob: uint8[ranks, row], each packed blob inside a row and
// none overlapping another.
void read_pack(Reading& reading, hid_t index) {
  auto& stored = reading.stored;
  auto& layout = stored.layout;
  const auto& blobs = stored.description.blobs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    if (layout.packed[i]) {
      ranges.emplace_back(layout.in_pack[i], blobs[i].value_bytes());
    }
  }
  if (ranges.empty()) {
    return;
  }
  const std::string what = "pack /index/packed";
  auto dataset = h5::open_child(index, "packed", true, what);
  h5::check_storage(dataset.get(), what);
  const auto shape = h5::shape_of(dataset.get(), what);
  if (h5::dtype_of(dataset.get(), what) != DType::kU8 || shape.size() != 2 ||
      shape[0] != stored.description.ranks()) {
    throw CorruptCheckpoint(what + " is not a uint8 table of one row per node");
  }
  layout.pack_row_bytes = shape[1];
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t previous_end = 0;
  for (const auto& [offset, size] : ranges) {
    if (offset < previous_end || offset > layout.pack_row_bytes ||
        size > layout.pack_row_bytes - offset) {
      throw CorruptCheckpoint(what + ": packed blobs overlap or lie outside its rows of " +
                              std::to_string(layout.pack_row_bytes) + " bytes");
    }
    previous_end = offset + size;
  }
  const auto bytes = shape[0] * shape[1];
  if (bytes > 0) {
    layout.pack_offset = h5::offset_of(dataset.get(), what);
    layout.extents.push_back(DataExtent{layout.pack_offset, bytes});
  }
}

// One ragged index row of an untrusted file: its value lies inside its blob's dataset, with
// the size its shape says.
RaggedValue ragged_value(const std::byte* row, std::size_t width, const BlobDescription& blob,
                         const std::string& what) {
  RaggedValue value;
  const auto ndim = static_cast<std::size_t>(row[0]);
  if (ndim > width) {
    throw CorruptCheckpoint(what + ": a row of " + std::to_string(ndim) + " dimensions");
  }
  value.shape.resize(ndim);
  std::memcpy(value.shape.data(), row + 1, 8 * ndim);
  std::memcpy(&value.offset, row + 1 + 8 * width, 8);
  std::memcpy(&value.size, row + 1 + 8 * width + 8, 8);
  const auto total = blob.value_bytes();
  const BlobRecord record{blob.name, blob.dtype, value.shape, 0};
  if (checked_byte_size(record, total, [&] { return what; }) != value.size ||
      value.offset > total || value.size > total - value.offset) {
    throw CorruptCheckpoint(what + ": a value of ragged blob '" + blob.name +
                            "' lies outside its dataset or does not match its shape");
  }
  return value;
}

// The ragged index: one row per (ragged blob, node), each value inside its blob's dataset.
void read_ragged_index(Reading& reading, hid_t index) {
  auto& stored = reading.stored;
  std::vector<const BlobDescription*> ragged;
  for (const auto& blob : stored.description.blobs) {
    if (blob.kind == StorageKind::kRagged) {
      ragged.push_back(&blob);
    }
  }
  if (ragged.empty()) {
    return;
  }
  const std::string what = "ragged index /index/ragged";
  auto dataset = h5::open_child(index, "ragged", true, what);
  Handle type(H5Dget_type(dataset.get()), "get type of " + what);
  const auto row_bytes = H5Tget_size(type.get());
  if (H5Tget_class(type.get()) != H5T_COMPOUND || H5Tget_nmembers(type.get()) != 4 ||
      row_bytes < 1 + 8 + 16 || (row_bytes - 17) % 8 != 0 ||
      (row_bytes - 17) / 8 > static_cast<std::size_t>(h5::kMaxDimensions)) {
    throw CorruptCheckpoint(what + " is not a table of ragged rows");
  }
  const std::size_t width = (row_bytes - 17) / 8;
  const auto ranks = stored.description.ranks();
  const auto rows = ragged.size() * ranks;
  stored.layout.ragged_row_bytes = row_bytes;
  stored.layout.ragged_index_offset =
      index_table_offset(dataset.get(), rows, row_bytes, what, reading);
  // Read as the file stores them (the writer's own packed little-endian type).
  std::vector<std::byte> bytes(rows * row_bytes);
  auto memory = ragged_row_file_type(width);
  if (H5Tequal(type.get(), memory.get()) <= 0) {
    throw CorruptCheckpoint(what + " is not a table of ragged rows");
  }
  h5::check(H5Dread(dataset.get(), memory.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
            "read " + what);
  stored.description.ragged_dimensions = width;
  for (std::size_t k = 0; k < ragged.size(); ++k) {
    auto& values = stored.ragged.emplace_back();
    for (std::uint64_t rank = 0; rank < ranks; ++rank) {
      values.push_back(
          ragged_value(bytes.data() + (k * ranks + rank) * row_bytes, width, *ragged[k], what));
    }
  }
}

// The index tables each rank writes (checksums, ragged rows): where a file sealed as it is laid
// out records them, as data extents beside the blobs' (every file written now); a file sealed
// after its data step (written before) covers them with its metadata hash instead, and then
// they must lie outside every data extent. The layout's extents end up as the file records them.
void check_extents(Reading& reading, const std::vector<DataExtent>& recorded) {
  auto& layout = reading.stored.layout;
  const std::vector<DataExtent> tables = {
      {layout.checksums_offset, 8 * reading.stored.checksums.size()},
      {layout.ragged_index_offset, layout.ragged_row_bytes * reading.stored.ragged.size() *
                                       reading.stored.description.ranks()}};
  auto with_tables = layout.extents;
  for (const auto& table : tables) {
    if (table.length > 0) {
      with_tables.push_back(table);
    }
  }
  std::sort(with_tables.begin(), with_tables.end(),
            [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
  if (same_extents(with_tables, recorded)) {
    layout.extents = std::move(with_tables);
    return;
  }
  for (const auto& table : tables) {
    for (const auto& extent : layout.extents) {
      if (table.length > 0 && table.offset < extent.offset + extent.length &&
          extent.offset < table.offset + table.length) {
        throw CorruptCheckpoint("an index table lies inside blob data");
      }
    }
  }
  check_extents_match(layout.extents, recorded);
}

// What a layout record says, checked as the HDF5 reader checks what it reads: the record is
// under a checksum of its own, but a crafted file can have made one.
class RecordCheck {
 public:
  // The header's extents sorted once: every blob of the record is looked up among them, and a
  // file of 10,000 blobs not packed has as many extents.
  explicit RecordCheck(const IntegrityHeader& integrity)
      : file_bytes_(integrity.file_size), extents_(integrity.extents) {
    std::sort(extents_.begin(), extents_.end(), before);
  }

  std::uint64_t file_bytes() const { return file_bytes_; }
  [[noreturn]] static void fail(const std::string& what) {
    throw CorruptCheckpoint("its layout record " + what);
  }
  // The bytes of `rows` × `row_bytes`, refused when they overflow or exceed the file.
  std::uint64_t bytes_of(std::uint64_t rows, std::uint64_t row_bytes, DType dtype,
                         const std::string& what) const {
    return checked_byte_size(BlobRecord{what, dtype, {rows, row_bytes}, 0}, file_bytes_,
                             [&] { return "layout record: " + what; });
  }
  // [offset, offset + length) must be one of the data extents the header recorded: then it lies
  // inside the file, outside the metadata. `what()` names it, built only for the error.
  void is_an_extent(std::uint64_t offset, std::uint64_t length,
                    const std::function<std::string()>& what) const {
    if (!std::binary_search(extents_.begin(), extents_.end(), DataExtent{offset, length}, before)) {
      fail("places " + what() + " outside the data extents of its integrity header");
    }
  }

 private:
  static bool before(const DataExtent& a, const DataExtent& b) {
    return std::pair(a.offset, a.length) < std::pair(b.offset, b.length);
  }

  std::uint64_t file_bytes_;
  std::vector<DataExtent> extents_;
};

void check_record_root(const FileDescription& description) {
  validate_stored_name(description.job, "job name");
  if (description.node_names.empty()) {
    RecordCheck::fail("names no node");
  }
  std::set<std::string> seen;
  for (const auto& node : description.node_names) {
    validate_stored_name(node, "node name");
    if (!seen.insert(node).second) {
      RecordCheck::fail("lists node '" + node + "' twice");
    }
  }
  if (description.ragged_dimensions < 1 ||
      description.ragged_dimensions > static_cast<std::size_t>(h5::kMaxDimensions)) {
    RecordCheck::fail("has a ragged index of " + std::to_string(description.ragged_dimensions) +
                      " dimensions");
  }
}

// One blob of the record: its kind, dtype and shape, and its bytes in a data extent of their own
// (or in the pack: `packed` collects its range in a pack row).
void check_record_blob(const StoredFileV3& stored, std::size_t i, const RecordCheck& check,
                       std::vector<std::pair<std::uint64_t, std::uint64_t>>& packed) {
  const auto& blob = stored.description.blobs[i];
  const auto& layout = stored.layout;
  validate_stored_name(blob.name, "blob name");
  if (i > 0 && !(stored.description.blobs[i - 1].name < blob.name)) {
    RecordCheck::fail("does not list its blobs sorted by name, once each");
  }
  if (static_cast<unsigned>(blob.kind) > static_cast<unsigned>(StorageKind::kRagged) ||
      static_cast<unsigned>(blob.dtype) > static_cast<unsigned>(DType::kBytes) ||
      blob.shape.size() > static_cast<std::size_t>(h5::kMaxDimensions) ||
      (blob.kind == StorageKind::kRagged && !blob.shape.empty()) ||
      (blob.kind == StorageKind::kGlobalArray && blob.shape.empty()) ||
      (blob.kind != StorageKind::kRagged && blob.ragged_elements != 0) ||
      (blob.kind == StorageKind::kGlobalArray) == blob.writer_blocks.empty() ||
      (layout.packed[i] && blob.kind != StorageKind::kPerNode)) {
    RecordCheck::fail("describes blob '" + blob.name + "' as no writer would");
  }
  const auto what = [&] { return "blob '" + blob.name + "'"; };
  const auto ranks = stored.description.ranks();
  const auto bytes =
      checked_byte_size(BlobRecord{{}, blob.dtype, dataset_shape(blob, ranks), 0},
                        check.file_bytes(), [&] { return "layout record: " + what(); });
  if (blob.kind == StorageKind::kGlobalArray) {
    read_or_corrupt([&] { check_tiling(blob.name, blob.shape, blob.writer_blocks); },
                    "layout record: ");
  }
  if (layout.packed[i]) {
    packed.emplace_back(layout.in_pack[i], blob.value_bytes());
  } else if (bytes > 0) {
    check.is_an_extent(layout.offsets[i], bytes, what);
  }
}

}  // namespace

StoredFileV3 read_checkpoint_layout_from_record(int fd, const IntegrityHeader& integrity) {
  auto stored = decode_layout_record(integrity.layout_record);
  const RecordCheck check(integrity);
  auto& description = stored.description;
  auto& layout = stored.layout;
  const auto& blobs = description.blobs;
  check_record_root(description);
  if (layout.offsets.size() != blobs.size() || layout.packed.size() != blobs.size() ||
      layout.in_pack.size() != blobs.size() ||
      layout.user_block_size != integrity.user_block_size ||
      !same_extents(layout.extents, integrity.extents)) {
    RecordCheck::fail("does not match its integrity header");
  }
  const auto ranks = description.ranks();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> packed;
  std::uint64_t per_node = 0;
  std::uint64_t checksums = 0;
  std::uint64_t ragged = 0;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    check_record_blob(stored, i, check, packed);
    const auto kind = blobs[i].kind;
    per_node += kind == StorageKind::kPerNode || kind == StorageKind::kRagged ? 1 : 0;
    ragged += kind == StorageKind::kRagged ? 1 : 0;
    checksums += kind == StorageKind::kReplicated    ? 1
                 : kind == StorageKind::kGlobalArray ? blobs[i].writer_blocks.size()
                                                     : 0;
  }
  if (per_node != layout.per_node_blobs) {
    RecordCheck::fail("counts " + std::to_string(layout.per_node_blobs) + " per-node blobs, not " +
                      std::to_string(per_node));
  }
  if (!packed.empty()) {
    std::sort(packed.begin(), packed.end());
    std::uint64_t previous_end = 0;
    for (const auto& [offset, size] : packed) {
      if (offset < previous_end || offset > layout.pack_row_bytes ||
          size > layout.pack_row_bytes - offset) {
        RecordCheck::fail("has packed blobs that overlap or lie outside the pack's rows");
      }
      previous_end = offset + size;
    }
    check.is_an_extent(layout.pack_offset,
                       check.bytes_of(ranks, layout.pack_row_bytes, DType::kU8, "the pack"),
                       [] { return "the pack"; });
  }
  checksums += ranks * per_node;
  if (checksums > 0) {
    const auto bytes = check.bytes_of(checksums, 1, DType::kI64, "the checksum table");
    check.is_an_extent(layout.checksums_offset, bytes, [] { return "the checksum table"; });
    stored.checksums.resize(checksums);
    read_or_corrupt([&] {
      read_at(fd, layout.checksums_offset, std::as_writable_bytes(std::span(stored.checksums)),
              "checksum table /index/xxh64");
    });
  }
  if (ragged > 0) {
    const std::string what = "ragged index /index/ragged";
    const auto width = description.ragged_dimensions;
    if (layout.ragged_row_bytes != 1 + 8 * width + 16) {
      RecordCheck::fail("gives the ragged index rows of " +
                        std::to_string(layout.ragged_row_bytes) + " bytes");
    }
    const auto bytes = check.bytes_of(ragged * ranks, layout.ragged_row_bytes, DType::kU8, what);
    check.is_an_extent(layout.ragged_index_offset, bytes, [] { return "the ragged index"; });
    std::vector<std::byte> rows(bytes);
    read_or_corrupt([&] { read_at(fd, layout.ragged_index_offset, rows, what); });
    std::size_t k = 0;
    for (const auto& blob : blobs) {
      if (blob.kind != StorageKind::kRagged) {
        continue;
      }
      auto& values = stored.ragged.emplace_back();
      for (std::uint64_t rank = 0; rank < ranks; ++rank) {
        values.push_back(ragged_value(rows.data() + (k * ranks + rank) * layout.ragged_row_bytes,
                                      width, blob, what));
      }
      ++k;
    }
  }
  return stored;
}

namespace {

// CorruptCheckpoint unless the layout record, when the file has one, says what its HDF5
// metadata says: a reader that trusts the record (a load) reads what one that reads HDF5 reads.
void check_record_matches(int fd, const IntegrityHeader& integrity, const StoredFileV3& read) {
  if (integrity.layout_record.empty()) {
    return;
  }
  if (encode_stored_file(read_checkpoint_layout_from_record(fd, integrity)) !=
      encode_stored_file(read)) {
    throw CorruptCheckpoint("its layout record does not match its HDF5 metadata");
  }
}

}  // namespace

std::string dataset_path(const BlobDescription& blob) {
  switch (blob.kind) {
    case StorageKind::kReplicated:
      return "/replicated/" + blob.name;
    case StorageKind::kGlobalArray:
      return "/arrays/" + blob.name;
    case StorageKind::kPerNode:
    case StorageKind::kRagged:
      break;
  }
  return "/nodes/" + blob.name;
}

StoredValues::StoredValues(const StoredFileV3& stored) : stored_(stored) {
  Before before;
  for (const auto& blob : stored.description.blobs) {
    before_.push_back(before);
    before.per_node += blob.kind == StorageKind::kPerNode || blob.kind == StorageKind::kRagged;
    before.replicated += blob.kind == StorageKind::kReplicated;
    before.ragged += blob.kind == StorageKind::kRagged;
  }
}

StoredValue StoredValues::at(std::size_t blob, std::uint64_t rank) const {
  const auto& layout = stored_.layout;
  const auto& described = stored_.description.blobs.at(blob);
  const auto& before = before_.at(blob);
  const auto ranks = stored_.description.ranks();
  // The checksum's place: per-node and ragged blobs node-major, then the replicated ones.
  StoredValue value{BlobRecord{described.name, described.dtype, described.shape, 0}, 0, false};
  std::uint64_t checksum = 0;
  switch (described.kind) {
    case StorageKind::kPerNode:
      value.packed = layout.packed[blob];
      value.offset = value.packed
                         ? layout.pack_offset + rank * layout.pack_row_bytes + layout.in_pack[blob]
                         : layout.offsets[blob] + rank * described.value_bytes();
      checksum = rank * layout.per_node_blobs + before.per_node;
      break;
    case StorageKind::kRagged: {
      const auto& node = stored_.ragged.at(before.ragged).at(rank);
      value.record.shape = node.shape;
      value.offset = layout.offsets[blob] + node.offset;
      checksum = rank * layout.per_node_blobs + before.per_node;
      break;
    }
    case StorageKind::kReplicated:
      value.offset = layout.offsets[blob];
      checksum = ranks * layout.per_node_blobs + before.replicated;
      break;
    case StorageKind::kGlobalArray:
      throw UsageError("global array '" + described.name + "' is read by blocks");
  }
  value.record.xxh64 = stored_.checksums.at(checksum);
  return value;
}

StoredValue stored_value(const StoredFileV3& stored, std::size_t blob, std::uint64_t rank) {
  return StoredValues(stored).at(blob, rank);
}

std::vector<std::uint64_t> writer_checksums(const StoredFileV3& stored, std::size_t blob) {
  const auto& blobs = stored.description.blobs;
  // After the per-node checksums come every replicated blob's, then each array's writers'.
  std::uint64_t at = stored.description.ranks() * stored.layout.per_node_blobs;
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    at += blobs[i].kind == StorageKind::kReplicated                ? 1
          : blobs[i].kind == StorageKind::kGlobalArray && i < blob ? blobs[i].writer_blocks.size()
                                                                   : 0;
  }
  const auto writers = blobs.at(blob).writer_blocks.size();
  const auto first = stored.checksums.begin() + static_cast<std::ptrdiff_t>(at);
  return {first, first + static_cast<std::ptrdiff_t>(writers)};
}

StoredFileV3 read_checkpoint_layout_v3(int fd, const IntegrityHeader& integrity) {
  std::int64_t version = 0;
  auto stored = read_checkpoint_layout_if_v3(fd, integrity, version);
  if (!stored) {
    throw CheckpointMismatch("format version " + std::to_string(version) + " is not version 3");
  }
  return std::move(*stored);
}

std::optional<StoredFileV3> read_checkpoint_layout_if_v3(int fd, const IntegrityHeader& integrity,
                                                         std::int64_t& version) {
  h5::set_up_library();
  try {
    auto fapl = checkpoint_file_access();
    Handle file(h5::open_file_read_only(descriptor_path(fd), fapl.get(), "open"));
    StoredFileV3 stored;
    CheckpointHeader root;
    read_root_attributes(file.get(), root, integrity.file_size);
    version = root.format_version;
    if (root.format_version != kFormatVersion3) {
      return std::nullopt;
    }
    stored.description =
        FileDescription{root.epoch, root.job, root.node_names, root.config_json, {}, 1};
    stored.layout.user_block_size = integrity.user_block_size;
    Reading reading{file.get(), integrity.file_size, stored, {}};
    auto index = h5::open_child(file.get(), "index", false, "group /index");
    read_index(reading, index.get());
    auto& blobs = stored.description.blobs;
    stored.layout.offsets.assign(blobs.size(), 0);
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      if (!stored.layout.packed[i]) {
        stored.layout.offsets[i] = read_blob_dataset(reading, blobs[i]);
      }
    }
    read_pack(reading, index.get());
    read_checksums(reading, index.get());
    read_ragged_index(reading, index.get());
    std::sort(stored.layout.extents.begin(), stored.layout.extents.end(),
              [](const DataExtent& a, const DataExtent& b) { return a.offset < b.offset; });
    check_extents(reading, integrity.extents);
    file.close("close");
    check_record_matches(fd, integrity, stored);
    return stored;
  } catch (const Hdf5Error& error) {
    throw CorruptCheckpoint("not a readable HDF5 file (" + std::string(error.what()) + ")");
  }
}

}  // namespace epochrun
