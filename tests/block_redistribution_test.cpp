// Redistributing a global array between decompositions on 3 real ranks: the blocks an array
// was written in (at 1, 2, 4 or 5 ranks, dealt round-robin to the 3 ranks) become the blocks
// of the 3 ranks, in 1, 2 and 3 dimensions, uneven ones included.
#include <gtest/gtest.h>

#include <vector>

#include "block_redistribution.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/global_array.hpp"

namespace epochrun {
namespace {

// A distinct value per cell: its row-major index in the global array.
std::int64_t cell_value(const Shape& shape, const Shape& cell) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    index = index * static_cast<std::int64_t>(shape[d]) + static_cast<std::int64_t>(cell[d]);
  }
  return index;
}

// The block's elements, row-major.
std::vector<std::int64_t> values_of(const Shape& shape, const Block& block) {
  std::vector<std::int64_t> values;
  if (block.element_count() == 0) {
    return values;
  }
  Shape cell = block.start;
  for (std::uint64_t i = 0; i < block.element_count(); ++i) {
    values.push_back(cell_value(shape, cell));
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++cell[d] < block.start[d] + block.count[d]) {
        break;
      }
      cell[d] = block.start[d];
    }
  }
  return values;
}

// Redistributes `shape`, written as `writers` balanced blocks dealt to the ranks round-robin,
// into the ranks' own balanced blocks; each rank checks it got exactly its cells.
void expect_redistributed(const Shape& shape, int writers) {
  const auto world = Communicator::world();
  std::vector<std::vector<Block>> held_by(static_cast<std::size_t>(world.size()));
  for (int writer = 0; writer < writers; ++writer) {
    held_by[static_cast<std::size_t>(writer % world.size())].push_back(
        balanced_block(shape, writers, writer));
  }
  std::vector<std::vector<std::int64_t>> storage;
  std::vector<HeldPiece> mine;
  for (const auto& block : held_by[static_cast<std::size_t>(world.rank())]) {
    storage.push_back(values_of(shape, block));
  }
  for (std::size_t i = 0; i < storage.size(); ++i) {
    mine.push_back(
        {held_by[static_cast<std::size_t>(world.rank())][i], std::as_bytes(std::span(storage[i]))});
  }
  std::vector<Block> wanted_by;
  for (int rank = 0; rank < world.size(); ++rank) {
    wanted_by.push_back(balanced_block(shape, world.size(), rank));
  }
  const Block& my_block = wanted_by[static_cast<std::size_t>(world.rank())];
  std::vector<std::int64_t> wanted(my_block.element_count(), -1);
  redistribute_blocks(world, sizeof(std::int64_t), held_by, mine, wanted_by,
                      std::as_writable_bytes(std::span(wanted)));
  EXPECT_EQ(wanted, values_of(shape, my_block)) << shape_to_string(shape) << " from " << writers
                                                << " writers, block " << block_to_string(my_block);
}

TEST(BlockRedistribution, FromAnyWriterCountToTheseRanksInOneTwoAndThreeDimensions) {
  for (const Shape& shape : {Shape{23}, Shape{10, 7}, Shape{5, 4, 6}, Shape{2, 9}}) {
    for (const int writers : {1, 2, 3, 4, 5}) {
      expect_redistributed(shape, writers);
    }
  }
}

TEST(BlockRedistribution, PiecesThatLeaveAWantedCellUnheldAreRefusedOnTheRankMissingIt) {
  const auto world = Communicator::world();
  const Shape shape{6, 4};
  // Every rank holds its own balanced block but rank 2, which holds nothing.
  std::vector<std::vector<Block>> held_by(3);
  for (int rank = 0; rank < 2; ++rank) {
    held_by[static_cast<std::size_t>(rank)].push_back(balanced_block(shape, 3, rank));
  }
  std::vector<Block> wanted_by;
  for (int rank = 0; rank < 3; ++rank) {
    wanted_by.push_back(balanced_block(shape, 3, rank));
  }
  const Block& my_block = wanted_by[static_cast<std::size_t>(world.rank())];
  std::vector<std::int64_t> values = values_of(shape, my_block);
  std::vector<HeldPiece> mine;
  if (world.rank() < 2) {
    mine.push_back({my_block, std::as_bytes(std::span(values))});
  }
  std::vector<std::int64_t> wanted(my_block.element_count());
  auto redistribute = [&] {
    redistribute_blocks(world, sizeof(std::int64_t), held_by, mine, wanted_by,
                        std::as_writable_bytes(std::span(wanted)));
  };
  if (world.rank() == 2) {
    EXPECT_THROW(redistribute(), UsageError);
  } else {
    EXPECT_NO_THROW(redistribute());
    EXPECT_EQ(wanted, values);
  }
}

}  // namespace
}  // namespace epochrun
