#include "stored_file_codec.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// Little-endian 64-bit fields and length-prefixed strings and lists, in the order below. The
// numbers are copied as they lie in memory: a layout of 10,000 blobs is over 100,000 of them,
// and a load's rank 0 encodes it on the path every rank waits on.
static_assert(std::endian::native == std::endian::little,
              "the layout's numbers are copied as little-endian bytes");

class Writer {
 public:
  // A small job's whole layout without growing (a load's rank 0 encodes one on its serial path).
  Writer() { bytes_.reserve(1024); }
  void number(std::uint64_t value) { append(&value, sizeof(value)); }
  void text(const std::string& value) {
    number(value.size());
    const auto* first = reinterpret_cast<const std::byte*>(value.data());
    bytes_.insert(bytes_.end(), first, first + value.size());
  }
  template <typename T, typename Put>
  void list(const std::vector<T>& values, Put&& put) {
    number(values.size());
    for (const auto& value : values) {
      put(value);
    }
  }
  void numbers(const std::vector<std::uint64_t>& values) {
    number(values.size());
    append(values.data(), values.size() * sizeof(std::uint64_t));
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t size) {
    if (size == 0) {
      return;  // an empty list's data may be null, which memcpy does not take
    }
    const auto at = bytes_.size();
    bytes_.resize(at + size);
    std::memcpy(bytes_.data() + at, data, size);
  }
  std::vector<std::byte> bytes_;
};

// What a Reader's bytes are: a broadcast (from another rank) or a layout record (from a file).
enum class Source { kBroadcast, kFile };

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, Source source) : bytes_(bytes), source_(source) {}
  std::uint64_t number() {
    need(8);
    std::uint64_t value = 0;
    std::memcpy(&value, bytes_.data() + at_, sizeof(value));
    at_ += 8;
    return value;
  }
  std::string text() {
    const auto size = number();
    need(size);
    std::string value(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return value;
  }
  // A list's length, refused when even one byte per element would not fit.
  std::uint64_t length() {
    const auto count = number();
    need(count);
    return count;
  }
  template <typename T, typename Get>
  std::vector<T> list(Get&& get) {
    const auto count = length();
    std::vector<T> values;
    values.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      values.push_back(get());
    }
    return values;
  }
  std::vector<std::uint64_t> numbers() {
    const auto count = number();
    if (count > (bytes_.size() - at_) / sizeof(std::uint64_t)) {
      fail("ends early");
    }
    std::vector<std::uint64_t> values(count);
    if (count > 0) {
      std::memcpy(values.data(), bytes_.data() + at_, count * sizeof(std::uint64_t));
      at_ += count * sizeof(std::uint64_t);
    }
    return values;
  }
  void finish() const {
    if (at_ != bytes_.size()) {
      fail("has " + std::to_string(bytes_.size() - at_) + " bytes too many");
    }
  }

 private:
  void need(std::uint64_t size) const {
    if (size > bytes_.size() - at_) {
      fail("ends early");
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    if (source_ == Source::kFile) {
      throw CorruptCheckpoint("its layout record " + what);
    }
    throw MpiError("a broadcast checkpoint layout " + what);
  }
  std::span<const std::byte> bytes_;
  Source source_;
  std::size_t at_ = 0;
};

void put_description(Writer& out, const FileDescription& description) {
  out.number(static_cast<std::uint64_t>(description.epoch));
  out.text(description.job);
  out.list(description.node_names, [&](const std::string& name) { out.text(name); });
  out.text(description.config_json);
  out.number(description.ragged_dimensions);
  out.list(description.blobs, [&](const BlobDescription& blob) {
    out.text(blob.name);
    out.number(static_cast<std::uint64_t>(blob.kind));
    out.number(static_cast<std::uint64_t>(blob.dtype));
    out.numbers(blob.shape);
    out.number(blob.ragged_elements);
    out.list(blob.writer_blocks, [&](const Block& block) {
      out.numbers(block.start);
      out.numbers(block.count);
    });
  });
}

FileDescription get_description(Reader& in) {
  FileDescription description;
  description.epoch = static_cast<std::int64_t>(in.number());
  description.job = in.text();
  description.node_names = in.list<std::string>([&] { return in.text(); });
  description.config_json = in.text();
  description.ragged_dimensions = in.number();
  description.blobs = in.list<BlobDescription>([&] {
    BlobDescription blob;
    blob.name = in.text();
    blob.kind = static_cast<StorageKind>(in.number());
    blob.dtype = static_cast<DType>(in.number());
    blob.shape = in.numbers();
    blob.ragged_elements = in.number();
    blob.writer_blocks = in.list<Block>([&] {
      Block block;
      block.start = in.numbers();
      block.count = in.numbers();
      return block;
    });
    return blob;
  });
  return description;
}

void put_layout(Writer& out, const LayoutV3& layout) {
  out.numbers(layout.offsets);
  out.list(layout.packed, [&](bool packed) { out.number(packed ? 1 : 0); });
  out.numbers(layout.in_pack);
  for (const auto value :
       {layout.pack_offset, layout.pack_row_bytes, layout.checksums_offset, layout.per_node_blobs,
        layout.ragged_index_offset, layout.ragged_row_bytes, layout.user_block_size}) {
    out.number(value);
  }
  out.list(layout.extents, [&](const DataExtent& extent) {
    out.number(extent.offset);
    out.number(extent.length);
  });
}

LayoutV3 get_layout(Reader& in) {
  LayoutV3 layout;
  layout.offsets = in.numbers();
  layout.packed = in.list<bool>([&] { return in.number() != 0; });
  layout.in_pack = in.numbers();
  for (auto* value : {&layout.pack_offset, &layout.pack_row_bytes, &layout.checksums_offset,
                      &layout.per_node_blobs, &layout.ragged_index_offset, &layout.ragged_row_bytes,
                      &layout.user_block_size}) {
    *value = in.number();
  }
  layout.extents = in.list<DataExtent>([&] {
    DataExtent extent;
    extent.offset = in.number();
    extent.length = in.number();
    return extent;
  });
  return layout;
}

}  // namespace

std::vector<std::byte> encode_stored_file(const StoredFileV3& stored) {
  Writer out;
  put_description(out, stored.description);
  put_layout(out, stored.layout);
  out.numbers(stored.checksums);
  out.list(stored.ragged, [&](const std::vector<RaggedValue>& values) {
    out.list(values, [&](const RaggedValue& value) {
      out.numbers(value.shape);
      out.number(value.offset);
      out.number(value.size);
    });
  });
  return out.take();
}

StoredFileV3 decode_stored_file(std::span<const std::byte> bytes) {
  Reader in(bytes, Source::kBroadcast);
  StoredFileV3 stored;
  stored.description = get_description(in);
  stored.layout = get_layout(in);
  stored.checksums = in.numbers();
  stored.ragged = in.list<std::vector<RaggedValue>>([&] {
    return in.list<RaggedValue>([&] {
      RaggedValue value;
      value.shape = in.numbers();
      value.offset = in.number();
      value.size = in.number();
      return value;
    });
  });
  in.finish();
  return stored;
}

std::vector<std::byte> layout_record_for(const FileDescription& description,
                                         const LayoutV3& layout) {
  Writer out;
  put_description(out, description);
  put_layout(out, layout);
  auto record = out.take();
  if (!fits_user_block(layout.extents.size(), record.size(), layout.user_block_size)) {
    return {};
  }
  return record;
}

std::size_t layout_record_bytes_at_most(const FileDescription& description) {
  // Every number is 8 bytes whatever its value: only the counts matter. At most one extent per
  // blob, the pack and the two tables.
  const auto blobs = description.blobs.size();
  LayoutV3 layout;
  layout.offsets.resize(blobs);
  layout.packed.resize(blobs);
  layout.in_pack.resize(blobs);
  layout.extents.resize(blobs + 3);
  Writer out;
  put_description(out, description);
  put_layout(out, layout);
  return out.take().size();
}

StoredFileV3 decode_layout_record(std::span<const std::byte> bytes) {
  Reader in(bytes, Source::kFile);
  StoredFileV3 stored;
  stored.description = get_description(in);
  stored.layout = get_layout(in);
  in.finish();
  return stored;
}

}  // namespace epochrun
