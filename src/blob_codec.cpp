#include "blob_codec.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

#include "epochrun/errors.hpp"

namespace epochrun {

std::vector<std::byte> encode_blobs(const std::map<std::string, Blob>& blobs) {
  auto header = nlohmann::json::array();
  std::size_t payload = 0;
  for (const auto& [name, blob] : blobs) {
    header.push_back(
        {{"name", name}, {"dtype", dtype_name(blob.dtype())}, {"shape", blob.shape()}});
    payload += blob.byte_size();
  }
  const std::string text = header.dump();
  std::vector<std::byte> buffer(8 + text.size() + payload);
  std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) {
    buffer[static_cast<std::size_t>(i)] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  }
  std::memcpy(buffer.data() + 8, text.data(), text.size());
  auto* out = buffer.data() + 8 + text.size();
  for (const auto& [name, blob] : blobs) {
    std::memcpy(out, blob.raw().data(), blob.byte_size());
    out += blob.byte_size();
  }
  return buffer;
}

std::map<std::string, Blob> decode_blobs(std::span<const std::byte> buffer) {
  if (buffer.size() < 8) {
    throw Error("blob buffer is truncated");
  }
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= static_cast<std::uint64_t>(buffer[static_cast<std::size_t>(i)]) << (8 * i);
  }
  if (length > buffer.size() - 8) {
    throw Error("blob buffer header is truncated");
  }
  auto header =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(buffer.data() + 8), length));
  std::map<std::string, Blob> blobs;
  std::size_t offset = 8 + length;
  for (const auto& entry : header) {
    Blob blob(parse_dtype(entry.at("dtype").get<std::string>()), entry.at("shape").get<Shape>());
    if (blob.byte_size() > buffer.size() - offset) {
      throw Error("blob buffer payload is truncated");
    }
    std::memcpy(blob.raw().data(), buffer.data() + offset, blob.byte_size());
    offset += blob.byte_size();
    blobs.emplace(entry.at("name").get<std::string>(), std::move(blob));
  }
  return blobs;
}

}  // namespace epochrun
