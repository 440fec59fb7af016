#include "global_array_read.hpp"

#include <xxhash.h>

#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

// Row-major strides, in elements, of a block of `count`.
Shape strides_of(const Shape& count) {
  Shape strides(count.size(), 1);
  for (std::size_t d = count.size(); d-- > 1;) {
    strides[d - 1] = strides[d] * count[d];
  }
  return strides;
}

// Visits the cells of `part` as runs that are contiguous both in `a` and in `b` (blocks that
// hold `part`, each stored row-major): visit(element offset in a, in b, elements). Trailing
// dimensions that `part` covers whole in both merge into one run, so a block of whole rows
// is one run instead of one per row.
template <typename Visit>
void for_each_run(const Block& part, const Block& a, const Block& b, Visit visit) {
  const std::size_t dimensions = part.count.size();
  if (part.element_count() == 0) {
    return;
  }
  std::size_t k = dimensions - 1;
  std::uint64_t run = part.count[k];
  while (k > 0 && part.count[k] == a.count[k] && part.count[k] == b.count[k]) {
    --k;
    run *= part.count[k];
  }
  const auto strides_a = strides_of(a.count);
  const auto strides_b = strides_of(b.count);
  Shape index(k, 0);  // over the dimensions before k, odometer-style
  for (;;) {
    std::uint64_t at_a = (part.start[k] - a.start[k]) * strides_a[k];
    std::uint64_t at_b = (part.start[k] - b.start[k]) * strides_b[k];
    for (std::size_t d = 0; d < k; ++d) {
      at_a += (part.start[d] + index[d] - a.start[d]) * strides_a[d];
      at_b += (part.start[d] + index[d] - b.start[d]) * strides_b[d];
    }
    visit(at_a, at_b, run);
    std::size_t d = k;
    while (d > 0 && ++index[d - 1] == part.count[d - 1]) {
      index[--d] = 0;
    }
    if (d == 0) {
      return;
    }
  }
}

// UsageError unless `part` is a block of the array's dimensions inside its shape.
void check_part(const BlobDescription& array, const Block& part) {
  bool inside = part.start.size() == array.shape.size() && part.count.size() == array.shape.size();
  for (std::size_t d = 0; inside && d < array.shape.size(); ++d) {
    inside = part.start[d] <= array.shape[d] && part.count[d] <= array.shape[d] - part.start[d];
  }
  if (!inside) {
    throw UsageError("part " + block_to_string(part) + " is not inside global array '" +
                     array.name + "' of shape " + shape_to_string(array.shape));
  }
}

// Writer block `block` of the array at `offset`, read whole (a run per row at most) and
// checked against the hash its writer recorded.
std::vector<std::byte> read_writer_block(int fd, const BlobDescription& array, std::uint64_t offset,
                                         const Block& block, std::uint64_t xxh64,
                                         const std::string& what) {
  const auto element = element_size(array.dtype);
  const Block whole{Shape(array.shape.size(), 0), array.shape};
  std::vector<std::byte> bytes(block.element_count() * element);
  read_or_corrupt([&] {  // an unreadable checkpoint is not a usable one
    for_each_run(block, whole, block,
                 [&](std::uint64_t in_file, std::uint64_t in_block, std::uint64_t elements) {
                   read_at(fd, offset + in_file * element,
                           std::span(bytes).subspan(in_block * element, elements * element), what);
                 });
  });
  const auto actual = XXH64(bytes.data(), bytes.size(), 0);
  if (actual != xxh64) {
    throw CorruptCheckpoint(what + ": checksum mismatch (stored xxh64 " + std::to_string(xxh64) +
                            ", data hashes to " + std::to_string(actual) + ")");
  }
  return bytes;
}

}  // namespace

Blob read_array_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                   const std::optional<Block>& part) {
  const auto& array = stored.description.blobs.at(blob);
  const Block wanted = part.value_or(Block{Shape(array.shape.size(), 0), array.shape});
  check_part(array, wanted);
  const auto checksums = writer_checksums(stored, blob);
  const auto element = element_size(array.dtype);
  Blob result(array.dtype, wanted.count);
  const auto out = result.raw();
  for (std::size_t writer = 0; writer < array.writer_blocks.size(); ++writer) {
    const auto& block = array.writer_blocks[writer];
    const auto cells = intersection(block, wanted);
    if (cells.element_count() == 0) {
      continue;
    }
    const auto bytes =
        read_writer_block(fd, array, stored.layout.offsets.at(blob), block, checksums.at(writer),
                          "dataset " + dataset_path(array) + ", writer block " +
                              std::to_string(writer) + " " + block_to_string(block));
    for_each_run(cells, block, wanted,
                 [&](std::uint64_t in_block, std::uint64_t in_part, std::uint64_t elements) {
                   std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(in_block * element),
                               elements * element,
                               out.begin() + static_cast<std::ptrdiff_t>(in_part * element));
                 });
  }
  return result;
}

}  // namespace epochrun
