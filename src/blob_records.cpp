#include "blob_records.hpp"

#include <cstring>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// A count (u64), then per record: u64 name length, the name, u64 dtype, u64 dimensions, each
// dimension (u64), u64 xxh64, u64 offset, u64 packed; native order (both ends are ranks of one
// job). Sized before it is filled: thousands of records must not grow a buffer step by step.
constexpr std::size_t kFixedRecordBytes = 6 * sizeof(std::uint64_t);

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : at_(out.data()) {}
  void u64(std::uint64_t value) { bytes(&value, sizeof value); }
  void bytes(const void* data, std::size_t size) {
    std::memcpy(at_, data, size);
    at_ += size;
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
  std::uint64_t u64() {
    std::uint64_t value = 0;
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
  writer.u64(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    writer.u64(record.name.size());
    writer.bytes(record.name.data(), record.name.size());
    writer.u64(static_cast<std::uint64_t>(record.dtype));
    writer.u64(record.shape.size());
    writer.bytes(record.shape.data(), sizeof(std::uint64_t) * record.shape.size());
    writer.u64(record.xxh64);
    writer.u64(places.empty() ? 0 : places[i].offset);
    writer.u64(!places.empty() && places[i].packed ? 1 : 0);
  }
  return out;
}

std::vector<BlobRecord> decode_records(std::span<const std::byte> bytes,
                                       std::vector<BlobPlace>* places) {
  Reader reader(bytes);
  const auto count = reader.u64();
  if (count > reader.left() / kFixedRecordBytes) {
    throw Error("a blob record list claims more records than it holds");
  }
  std::vector<BlobRecord> records(static_cast<std::size_t>(count));
  if (places != nullptr) {
    places->reserve(places->size() + records.size());
  }
  for (auto& record : records) {
    const auto name = reader.take(reader.u64());
    record.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    record.dtype = static_cast<DType>(reader.u64());
    const auto dimensions = reader.u64();
    const auto shape = reader.take(dimensions, sizeof(std::uint64_t));
    record.shape.resize(static_cast<std::size_t>(dimensions));
    std::memcpy(record.shape.data(), shape.data(), shape.size());
    record.xxh64 = reader.u64();
    const auto offset = reader.u64();
    const auto packed = reader.u64() != 0;
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
