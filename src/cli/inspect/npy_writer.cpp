#include "inspect/npy_writer.hpp"

#include "epochrun/errors.hpp"
#include "regular_file.hpp"

namespace epochrun::cli {
namespace {

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "<f4";
    case DType::kF64:
      return "<f8";
    case DType::kI32:
      return "<i4";
    case DType::kI64:
      return "<i8";
    case DType::kU8:
    case DType::kBytes:
      return "|u1";
  }
  return "|u1";
}

// A Python tuple: "()", "(5,)", "(2, 3)".
std::string python_tuple(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  return out + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string npy_header(DType dtype, const Shape& shape) {
  std::string dict = "{'descr': '" + std::string(npy_descr(dtype)) +
                     "', 'fortran_order': False, 'shape': " + python_tuple(shape) + ", }";
  constexpr std::size_t kPreamble = 10;  // magic (6), version (2), header length (2)
  constexpr std::size_t kAlignment = 64;
  const auto unpadded = kPreamble + dict.size() + 1;  // + the final newline
  dict.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  dict += '\n';
  if (dict.size() > 0xffff) {  // version 1.0 counts the header in 16 bits
    throw UsageError("a shape of " + std::to_string(shape.size()) +
                     " dimensions does not fit a .npy header");
  }
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void write_npy(const std::filesystem::path& file, const Blob& blob) {
  const auto header = npy_header(blob.dtype(), blob.shape());
  auto fd = create_new_file(file);
  write_at(fd.get(), 0, std::as_bytes(std::span(header)), file.string());
  write_at(fd.get(), header.size(), blob.raw(), file.string());
  fd.close(file.string());
}

}  // namespace epochrun::cli
