#include "blob_codec.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "epochrun/errors.hpp"
#include "json_text.hpp"

namespace epochrun {

std::vector<std::byte> encode_blobs(const std::map<std::string, Blob>& blobs) {
  auto header = nlohmann::json::array();
  std::size_t payload = 0;
  for (const auto& [name, blob] : blobs) {
    header.push_back(
        {{"name", name}, {"dtype", dtype_name(blob.dtype())}, {"shape", blob.shape()}});
    payload += blob.byte_size();
  }
  const std::string text = json_text(header);
  std::vector<std::byte> buffer(8 + text.size() + payload);
  std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) {
    buffer[static_cast<std::size_t>(i)] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  }
  std::memcpy(buffer.data() + 8, text.data(), text.size());
  auto* out = buffer.data() + 8 + text.size();
  for (const auto& [name, blob] : blobs) {
    // std::copy, not memcpy: an empty blob's data pointer may be null (found by UBSan).
    out = std::copy(blob.raw().begin(), blob.raw().end(), out);
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
    const auto dtype = parse_dtype(entry.at("dtype").get<std::string>());
    const auto shape = entry.at("shape").get<Shape>();
    // Checked before allocating: a header may claim any shape.
    const auto count = element_count(shape);
    if (count > (buffer.size() - offset) / element_size(dtype)) {
      throw Error("blob buffer payload is truncated");
    }
    Blob blob(dtype, shape);
    std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(offset), blob.byte_size(),
                blob.raw().begin());
    offset += blob.byte_size();
    blobs.emplace(entry.at("name").get<std::string>(), std::move(blob));
  }
  return blobs;
}

}  // namespace epochrun
