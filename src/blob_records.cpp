#include "blob_records.hpp"

#include <cstring>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// Per record: u64 name length, the name, u64 dtype, u64 dimensions, each dimension (u64),
// u64 xxh64, u64 offset, u64 packed; native order (both ends are ranks of one job).
void put(std::vector<std::byte>& out, std::uint64_t value) {
  const auto* bytes = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof value);
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool done() const { return at_ == bytes_.size(); }
  std::span<const std::byte> take(std::uint64_t size) {
    if (size > bytes_.size() - at_) {
      throw Error("a blob record list is truncated");
    }
    const auto taken = bytes_.subspan(at_, static_cast<std::size_t>(size));
    at_ += static_cast<std::size_t>(size);
    return taken;
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
  std::vector<std::byte> out;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& record = records[i];
    put(out, record.name.size());
    const auto* name = reinterpret_cast<const std::byte*>(record.name.data());
    out.insert(out.end(), name, name + record.name.size());
    put(out, static_cast<std::uint64_t>(record.dtype));
    put(out, record.shape.size());
    for (auto dimension : record.shape) {
      put(out, dimension);
    }
    put(out, record.xxh64);
    put(out, places.empty() ? 0 : places[i].offset);
    put(out, !places.empty() && places[i].packed ? 1 : 0);
  }
  return out;
}

std::vector<BlobRecord> decode_records(std::span<const std::byte> bytes,
                                       std::vector<BlobPlace>* places) {
  std::vector<BlobRecord> records;
  Reader reader(bytes);
  while (!reader.done()) {
    BlobRecord record;
    const auto name = reader.take(reader.u64());
    record.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
    record.dtype = static_cast<DType>(reader.u64());
    const auto dimensions = reader.u64();
    for (std::uint64_t i = 0; i < dimensions; ++i) {
      record.shape.push_back(reader.u64());
    }
    record.xxh64 = reader.u64();
    const auto offset = reader.u64();
    const auto packed = reader.u64() != 0;
    if (places != nullptr) {
      places->push_back(BlobPlace{offset, packed});
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace epochrun
