// Global arrays: one n-dimensional array of a global shape, split over the ranks in blocks.
// Each rank holds its block (a start and a count per dimension); the blocks of all ranks tile
// the global array exactly. The helpers here split a shape over a process grid the way
// MPI_Dims_create balances one, and check that any set of blocks tiles a shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epochrun/blob.hpp"
#include "epochrun/export.hpp"

namespace epochrun {

// One rank's part of a global array: the elements [start[d], start[d] + count[d]) of every
// dimension d. A block with a zero count holds no elements.
struct Block {
  Shape start;
  Shape count;

  std::uint64_t element_count() const { return epochrun::element_count(count); }
  friend bool operator==(const Block&, const Block&) = default;
};

// The block both `a` and `b` hold (a zero count where they do not meet). Same dimensions.
EPOCHRUN_API Block intersection(const Block& a, const Block& b);

// "[0:4, 2:6]": each dimension's half-open range, for messages.
EPOCHRUN_API std::string block_to_string(const Block& block);

// Ranks per dimension for `ranks` ranks over `dimensions` dimensions, as balanced as
// MPI_Dims_create makes it (non-increasing, product = ranks). UsageError for ranks < 1 or no
// dimension.
EPOCHRUN_API std::vector<int> process_grid(int ranks, std::size_t dimensions);

// The block of `rank` when `global_shape` is split over `grid` (ranks per dimension, ranks
// numbered row-major over the grid, as MPI_Cart_create numbers them). A dimension of n elements
// over p ranks gives the first n % p ranks one element more than the others.
EPOCHRUN_API Block grid_block(const Shape& global_shape, const std::vector<int>& grid, int rank);

// grid_block over process_grid(ranks, global_shape.size()): the default decomposition.
EPOCHRUN_API Block balanced_block(const Shape& global_shape, int ranks, int rank);

// UsageError when `blocks` (index = rank) do not tile `global_shape` exactly, naming the array
// and the ranks: a block outside the array or of other dimensions, two blocks that overlap, or
// cells no block holds.
EPOCHRUN_API void check_tiling(const std::string& array, const Shape& global_shape,
                               const std::vector<Block>& blocks);

}  // namespace epochrun
