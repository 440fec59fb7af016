#include "blob_records.hpp"

#include <cstring>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// A count (u64), then per record: the name's length (u16) and the name, the dtype (u8), the
// number of dimensions (u8) and each dimension (u64), the xxh64 (u64), the offset (u64), packed
// (u8); native order (both ends are ranks of one job). The records are a save's described
// blobs or a file's, whose names (at most kMaxNameLength) and shapes (at most
// h5::kMaxDimensions) were checked. Sized before it is filled: thousands of records must not
// grow a buffer step by step.
constexpr std::size_t kFixedRecordBytes = 2 + 1 + 1 + 8 + 8 + 1;

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : at_(out.data()) {}
  template <typename T>
  void put(T value) {
    bytes(&value, sizeof value);
  }
  void bytes(const void* data, std::size_t size) {
    if (size > 0) {  // an empty shape's data() may be null, which memcpy must not get
      std::memcpy(at_, data, size);
      at_ += size;
    }
  }

 private:
  std::byte* at_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t left() const { return bytes_.size() - at_; }
  std::span<const std::byte> take(std::uint64_t size) {
    if (size > left()) {
      throw Error("a blob record list is truncated");
    }
    const auto taken = bytes_.subspan(at_, static_cast<std::size_t>(size));
    at_ += static_cast<std::size_t>(size);
    return taken;
  }
  // `count` elements of `size` bytes each.
  std::span<const std::byte> take(std::uint64_t count, std::size_t size) {
    if (count > left() / size) {
      throw Error("a blob record list is truncated");
    }
    return take(count * size);
  }
  template <typename T>
  T get() {
    T value{};
    std::memcpy(&value, take(sizeof value).data(), sizeof value);
    return value;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<std::byte> encode_records(const std::vector<BlobRecord>& records,
                                      const std::vector<BlobPlace>& places) {
  std::size_t size = sizeof(std::uint64_t);
  for (const auto& record : records) {
    size += kFixedRecordBytes + record.name.size() + sizeof(std::uint64_t) * record.shape.size();
  }
  std::vector<std::byte> out(size);
  Writer writer(out);
  writer.put<std::uint64_t>(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    writer.put(static_cast<std::uint16_t>(record.name.size()));
    writer.bytes(record.name.data(), record.name.size());
    writer.put(static_cast<std::uint8_t>(record.dtype));
    writer.put(static_cast<std::uint8_t>(record.shape.size()));
    writer.bytes(record.shape.data(), sizeof(std::uint64_t) * record.shape.size());
    writer.put(record.xxh64);
    writer.put<std::uint64_t>(places.empty() ? 0 : places[i].offset);
    writer.put<std::uint8_t>(!places.empty() && places[i].packed ? 1 : 0);
  }
  return out;
}

std::vector<BlobRecord> decode_records(std::span<const std::byte> bytes,
                                       std::vector<BlobPlace>* places) {
  Reader reader(bytes);
  const auto count = reader.get<std::uint64_t>();
  if (count > reader.left() / kFixedRecordBytes) {
    throw Error("a blob record list claims more records than it holds");
  }
  std::vector<BlobRecord> records(static_cast<std::size_t>(count));
  if (places != nullptr) {
    places->reserve(places->size() + records.size());
  }
  for (auto& record : records) {
    const auto name = reader.take(reader.get<std::uint16_t>());
    record.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    record.dtype = static_cast<DType>(reader.get<std::uint8_t>());
    const auto shape = reader.take(reader.get<std::uint8_t>(), sizeof(std::uint64_t));
    record.shape.resize(shape.size() / sizeof(std::uint64_t));
    if (!shape.empty()) {  // a scalar's: memcpy must not get its null data()
      std::memcpy(record.shape.data(), shape.data(), shape.size());
    }
    record.xxh64 = reader.get<std::uint64_t>();
    const auto offset = reader.get<std::uint64_t>();
    const auto packed = reader.get<std::uint8_t>() != 0;
    if (places != nullptr) {
      places->push_back(BlobPlace{offset, packed});
    }
  }
  if (reader.left() != 0) {
    throw Error("a blob record list has bytes after its last record");
  }
  return records;
}

}  // namespace epochrun
