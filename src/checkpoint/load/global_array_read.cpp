#include "global_array_read.hpp"

#include <xxhash.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "fresh_memory.hpp"
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

// How errors name writer block `writer` of `array`.
std::string block_what(const BlobDescription& array, std::size_t writer) {
  return "dataset " + dataset_path(array) + ", writer block " + std::to_string(writer) + " " +
         block_to_string(array.writer_blocks.at(writer));
}

// CorruptCheckpoint naming the block `what` names unless its bytes hashed to `xxh64`.
void check_block(std::uint64_t actual, std::uint64_t xxh64, const std::string& what) {
  if (actual != xxh64) {
    throw CorruptCheckpoint(what + ": checksum mismatch (stored xxh64 " + std::to_string(xxh64) +
                            ", data hashes to " + std::to_string(actual) + ")");
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
  check_block(XXH64(bytes.data(), bytes.size(), 0), xxh64, what);
  return bytes;
}

// Writer block `block`, every cell of it inside `wanted`, read straight into its cells of `out`
// (the cells of `wanted`, row-major) and checked against the hash its writer recorded: its runs,
// in the block's own row-major order, each read in pieces that are made resident, read into and
// hashed while they are still in the CPU cache. No buffer of the block's size, and no copy out
// of one: for a whole array (`inspect --export`, --show, --diff, a partial load of it) every
// block takes this way.
void read_block_in_place(int fd, const BlobDescription& array, std::uint64_t offset,
                         const Block& block, const Block& wanted, std::uint64_t xxh64,
                         const std::string& what, std::span<std::byte> out) {
  constexpr std::size_t kPiece = 4 << 20;
  constexpr std::size_t kPopulateFrom = 128 << 10;  // as read_verified_blob's
  const auto element = element_size(array.dtype);
  const Block whole{Shape(array.shape.size(), 0), array.shape};
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  read_or_corrupt([&] {  // an unreadable checkpoint is not a usable one
    for_each_run(block, whole, wanted,
                 [&](std::uint64_t in_file, std::uint64_t in_part, std::uint64_t elements) {
                   const auto run = out.subspan(in_part * element, elements * element);
                   for (std::size_t at = 0; at < run.size(); at += kPiece) {
                     const auto piece = run.subspan(at, std::min(kPiece, run.size() - at));
                     if (run.size() >= kPopulateFrom) {
                       populate_for_writing(piece);
                     }
                     read_at(fd, offset + in_file * element + at, piece, what);
                     XXH64_update(state.get(), piece.data(), piece.size());
                   }
                 });
  });
  check_block(XXH64_digest(state.get()), xxh64, what);
}

// The runs of `block` that are contiguous in the row-major array of `shape` (trailing
// dimensions the block covers whole merge into one run, as for_each_run merges them), one at a
// time, in the block's own row-major order, which is also their order in the array.
class BlockRuns {
 public:
  BlockRuns(const Shape& shape, const Block& block)
      : block_(block), strides_(strides_of(shape)), done_(block.element_count() == 0) {
    if (shape.empty()) {  // a single cell
      return;
    }
    k_ = shape.size() - 1;
    run_ = block.count[k_];
    while (k_ > 0 && block.count[k_] == shape[k_]) {
      --k_;
      run_ *= block.count[k_];
    }
    index_.assign(k_, 0);
  }

  bool done() const { return done_; }
  // The run's first cell, counted in elements from the array's first.
  std::uint64_t offset() const {
    if (strides_.empty()) {
      return 0;
    }
    std::uint64_t at = block_.start[k_] * strides_[k_];
    for (std::size_t d = 0; d < k_; ++d) {
      at += (block_.start[d] + index_[d]) * strides_[d];
    }
    return at;
  }
  std::uint64_t length() const { return run_; }  // in cells
  void next() {
    std::size_t d = k_;
    while (d > 0 && ++index_[d - 1] == block_.count[d - 1]) {
      index_[--d] = 0;
    }
    done_ = d == 0;
  }

 private:
  const Block& block_;
  Shape strides_;
  std::size_t k_ = 0;      // the run spans dimensions k_ and after
  std::uint64_t run_ = 1;  // elements per run
  Shape index_;            // over the dimensions before k_, odometer-style
  bool done_ = false;
};

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
    if (cells == block) {
      read_block_in_place(fd, array, stored.layout.offsets.at(blob), block, wanted,
                          checksums.at(writer), block_what(array, writer), out);
      continue;
    }
    // Only some of the block's cells are wanted, but its hash covers all of them.
    const auto bytes = read_writer_block(fd, array, stored.layout.offsets.at(blob), block,
                                         checksums.at(writer), block_what(array, writer));
    for_each_run(cells, block, wanted,
                 [&](std::uint64_t in_block, std::uint64_t in_part, std::uint64_t elements) {
                   std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(in_block * element),
                               elements * element,
                               out.begin() + static_cast<std::ptrdiff_t>(in_part * element));
                 });
  }
  return result;
}

std::uint64_t verify_array_v3(int fd, const StoredFileV3& stored, std::size_t blob,
                              std::span<std::byte> scratch) {
  const auto& array = stored.description.blobs.at(blob);
  const auto& blocks = array.writer_blocks;
  const auto checksums = writer_checksums(stored, blob);
  const auto element = element_size(array.dtype);
  const auto begin = stored.layout.offsets.at(blob);
  std::uint64_t cells = 1;
  for (const auto extent : array.shape) {
    cells *= extent;
  }
  const auto end = begin + cells * element;
  using State = std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)>;
  std::vector<State> states;
  std::vector<BlockRuns> runs;
  states.reserve(blocks.size());
  runs.reserve(blocks.size());
  // The blocks tile the array (the judge checked it): merged by their offsets, their runs follow
  // one another through the dataset, and the pieces of the window are read front to back.
  using Next = std::pair<std::uint64_t, std::size_t>;  // a run's first cell, its writer
  std::priority_queue<Next, std::vector<Next>, std::greater<>> order;
  for (std::size_t writer = 0; writer < blocks.size(); ++writer) {
    states.emplace_back(XXH64_createState(), XXH64_freeState);
    XXH64_reset(states.back().get(), 0);
    runs.emplace_back(array.shape, blocks[writer]);
    if (!runs.back().done()) {
      order.emplace(runs.back().offset(), writer);
    }
  }
  std::uint64_t window = 0;      // the file offset of scratch's first byte
  std::uint64_t window_end = 0;  // and past its last
  std::uint64_t verified = 0;
  read_or_corrupt([&] {  // an unreadable checkpoint is not a usable one
    while (!order.empty()) {
      const auto [first, writer] = order.top();
      order.pop();
      auto at = begin + first * element;
      auto bytes = runs[writer].length() * element;
      verified += bytes;
      while (bytes > 0) {
        if (at < window || at >= window_end) {
          const auto size = std::min<std::uint64_t>(scratch.size(), std::max(end, at + bytes) - at);
          read_at(fd, at, scratch.first(static_cast<std::size_t>(size)), block_what(array, writer));
          window = at;
          window_end = at + size;
        }
        const auto take = std::min(bytes, window_end - at);
        XXH64_update(states[writer].get(), scratch.data() + (at - window),
                     static_cast<std::size_t>(take));
        at += take;
        bytes -= take;
      }
      runs[writer].next();
      if (!runs[writer].done()) {
        order.emplace(runs[writer].offset(), writer);
      }
    }
  });
  for (std::size_t writer = 0; writer < blocks.size(); ++writer) {
    if (blocks[writer].element_count() > 0) {
      check_block(XXH64_digest(states[writer].get()), checksums.at(writer),
                  block_what(array, writer));
    }
  }
  return verified;
}

}  // namespace epochrun
