// The block decomposition of global arrays: process grids, blocks, intersections, and the
// tiling check that refuses a gap or an overlap with the ranks named.
#include "epochrun/global_array.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// The message of the UsageError check_tiling throws ("" when it accepts the blocks).
std::string refusal(const Shape& shape, const std::vector<Block>& blocks) {
  try {
    check_tiling("field", shape, blocks);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

std::vector<Block> balanced_blocks(const Shape& shape, int ranks) {
  std::vector<Block> blocks;
  for (int rank = 0; rank < ranks; ++rank) {
    blocks.push_back(balanced_block(shape, ranks, rank));
  }
  return blocks;
}

TEST(GlobalArray, ProcessGridsAreBalancedLikeMpiDimsCreate) {
  EXPECT_EQ(process_grid(1, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(process_grid(4, 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(process_grid(6, 2), (std::vector<int>{3, 2}));
  EXPECT_EQ(process_grid(12, 2), (std::vector<int>{4, 3}));
  EXPECT_EQ(process_grid(7, 2), (std::vector<int>{7, 1}));
  EXPECT_EQ(process_grid(8, 3), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(process_grid(96, 2), (std::vector<int>{12, 8}));
  EXPECT_THROW(process_grid(0, 2), UsageError);
  EXPECT_THROW(process_grid(3, 0), UsageError);
}

TEST(GlobalArray, GridBlocksAreRowMajorWithTheRemainderFirst) {
  // 10 x 7 over a 3 x 2 grid: rows 4, 3, 3; columns 4, 3.
  const Shape shape{10, 7};
  const std::vector<int> grid{3, 2};
  EXPECT_EQ(grid_block(shape, grid, 0), (Block{{0, 0}, {4, 4}}));
  EXPECT_EQ(grid_block(shape, grid, 1), (Block{{0, 4}, {4, 3}}));
  EXPECT_EQ(grid_block(shape, grid, 2), (Block{{4, 0}, {3, 4}}));
  EXPECT_EQ(grid_block(shape, grid, 5), (Block{{7, 4}, {3, 3}}));
  EXPECT_THROW(grid_block(shape, grid, 6), UsageError);
  EXPECT_THROW(grid_block(Shape{10}, grid, 0), UsageError);
}

TEST(GlobalArray, BalancedBlocksTileEveryShapeAtEveryRankCount) {
  for (const Shape& shape : {Shape{17}, Shape{10, 7}, Shape{3, 5, 4}, Shape{2, 2}}) {
    for (int ranks = 1; ranks <= 13; ++ranks) {
      SCOPED_TRACE(shape_to_string(shape) + " over " + std::to_string(ranks));
      const auto blocks = balanced_blocks(shape, ranks);
      EXPECT_NO_THROW(check_tiling("field", shape, blocks));
      std::uint64_t held = 0;
      for (const auto& block : blocks) {
        held += block.element_count();
      }
      EXPECT_EQ(held, element_count(shape));
    }
  }
}

TEST(GlobalArray, IntersectionsOfBlocks) {
  const Block a{{0, 0}, {4, 4}};
  const Block b{{2, 3}, {4, 4}};
  EXPECT_EQ(intersection(a, b), (Block{{2, 3}, {2, 1}}));
  EXPECT_EQ(intersection(a, Block{{4, 0}, {2, 4}}).element_count(), 0u);
  EXPECT_EQ(block_to_string(b), "[2:6, 3:7]");
}

TEST(GlobalArray, AnOverlapIsRefusedNamingBothRanks) {
  const Shape shape{8, 8};
  auto blocks = balanced_blocks(shape, 4);  // 2 x 2 blocks of 4 x 4
  blocks[3] = Block{{3, 4}, {5, 4}};        // reaches one row into rank 1's block
  EXPECT_EQ(refusal(shape, blocks),
            "global array 'field': rank 1's block [0:4, 4:8] and rank 3's block [3:8, 4:8] overlap "
            "in [3:4, 4:8]");
}

TEST(GlobalArray, AGapIsRefusedNamingTheCellsAndTheRanksBesideThem) {
  const Shape shape{8, 8};
  auto blocks = balanced_blocks(shape, 4);
  blocks[2] = Block{{4, 0}, {4, 3}};  // leaves column 3 of the lower half
  EXPECT_EQ(refusal(shape, blocks),
            "global array 'field' of shape [8, 8]: the blocks of the 4 ranks hold 60 of its 64 "
            "elements; no rank's block holds [4:8, 3:4] (next to the blocks of ranks 0, 2, 3)");
}

TEST(GlobalArray, ABlockOutsideTheArrayOrOfOtherDimensionsIsRefused) {
  const Shape shape{8, 8};
  auto blocks = balanced_blocks(shape, 2);
  blocks[1].count[0] = 5;
  EXPECT_EQ(refusal(shape, blocks),
            "global array 'field' of shape [8, 8]: rank 1's block [4:9, 0:8] reaches outside it");
  blocks = balanced_blocks(shape, 2);
  blocks[0] = Block{{0}, {4}};
  EXPECT_EQ(refusal(shape, blocks),
            "global array 'field': rank 0's block has 1 dimensions, the array 2");
}

TEST(GlobalArray, EmptyBlocksAreAllowedWhereOthersTileTheArray) {
  // More ranks than rows: some ranks hold nothing.
  const Shape shape{2};
  const auto blocks = balanced_blocks(shape, 5);
  EXPECT_NO_THROW(check_tiling("field", shape, blocks));
  EXPECT_EQ(blocks[4].element_count(), 0u);
}

}  // namespace
}  // namespace epochrun
