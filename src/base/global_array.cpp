#include "epochrun/global_array.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

#include "epochrun/errors.hpp"

namespace epochrun {

namespace {

// Prime factors of n, largest first.
std::vector<int> prime_factors(int n) {
  std::vector<int> factors;
  for (int p = 2; p * p <= n; ++p) {
    while (n % p == 0) {
      factors.push_back(p);
      n /= p;
    }
  }
  if (n > 1) {
    factors.push_back(n);
  }
  std::sort(factors.rbegin(), factors.rend());
  return factors;
}

std::uint64_t end_of(const Block& block, std::size_t dimension) {
  return block.start[dimension] + block.count[dimension];
}

std::string rank_block(const std::vector<Block>& blocks, std::size_t rank) {
  return "rank " + std::to_string(rank) + "'s block " + block_to_string(blocks[rank]);
}

void check_bounds(const std::string& array, const Shape& global_shape,
                  const std::vector<Block>& blocks) {
  for (std::size_t rank = 0; rank < blocks.size(); ++rank) {
    const Block& block = blocks[rank];
    if (block.start.size() != global_shape.size() || block.count.size() != global_shape.size()) {
      throw UsageError("global array '" + array + "': rank " + std::to_string(rank) +
                       "'s block has " + std::to_string(block.start.size()) +
                       " dimensions, the array " + std::to_string(global_shape.size()));
    }
    for (std::size_t d = 0; d < global_shape.size(); ++d) {
      if (block.count[d] > global_shape[d] || block.start[d] > global_shape[d] - block.count[d]) {
        throw UsageError("global array '" + array + "' of shape " + shape_to_string(global_shape) +
                         ": " + rank_block(blocks, rank) + " reaches outside it");
      }
    }
  }
}

// The dimension along which the blocks' starts differ most: sweeping along it compares the
// fewest pairs of blocks.
std::size_t sweep_dimension(const std::vector<Block>& blocks, std::size_t dimensions) {
  std::size_t best = 0;
  std::size_t most = 0;
  for (std::size_t d = 0; d < dimensions; ++d) {
    std::vector<std::uint64_t> starts;
    for (const auto& block : blocks) {
      starts.push_back(block.start[d]);
    }
    std::sort(starts.begin(), starts.end());
    const auto distinct =
        static_cast<std::size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (distinct > most) {
      most = distinct;
      best = d;
    }
  }
  return best;
}

// Sweeps the non-empty blocks along one dimension, comparing only those whose ranges along it
// meet: O(ranks log ranks) for the grids jobs use.
void check_overlaps(const std::string& array, const std::vector<Block>& blocks,
                    std::size_t dimensions) {
  if (dimensions == 0) {
    return;
  }
  const std::size_t d = sweep_dimension(blocks, dimensions);
  std::vector<std::size_t> order;
  for (std::size_t rank = 0; rank < blocks.size(); ++rank) {
    if (blocks[rank].element_count() > 0) {
      order.push_back(rank);
    }
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(blocks[a].start[d], a) < std::pair(blocks[b].start[d], b);
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Block& first = blocks[order[i]];
    for (std::size_t j = i + 1; j < order.size() && blocks[order[j]].start[d] < end_of(first, d);
         ++j) {
      const Block both = intersection(first, blocks[order[j]]);
      if (both.element_count() > 0) {
        const auto [low, high] = std::minmax(order[i], order[j]);
        throw UsageError("global array '" + array + "': " + rank_block(blocks, low) + " and " +
                         rank_block(blocks, high) + " overlap in " + block_to_string(both));
      }
    }
  }
}

// Calls `visit` with every cell of `range`, row-major.
template <typename Visit>
void for_each_cell(const Block& range, Visit visit) {
  if (range.element_count() == 0) {
    return;
  }
  Shape cell = range.start;
  while (true) {
    visit(cell);
    std::size_t d = cell.size();
    while (d > 0) {
      --d;
      if (++cell[d] < end_of(range, d)) {
        break;
      }
      cell[d] = range.start[d];
      if (d == 0) {
        return;
      }
    }
  }
}

Shape compressed_shape(const std::vector<std::vector<std::uint64_t>>& cuts) {
  Shape shape;
  for (const auto& dimension : cuts) {
    shape.push_back(dimension.size() - 1);
  }
  return shape;
}

std::uint64_t flat_index(const std::vector<std::vector<std::uint64_t>>& cuts, const Shape& cell) {
  std::uint64_t index = 0;
  for (std::size_t d = 0; d < cell.size(); ++d) {
    index = index * (cuts[d].size() - 1) + cell[d];
  }
  return index;
}

// Whether `block` ends where `gap` starts, or starts where it ends, along one dimension while
// meeting it along the others.
bool touches(const Block& block, const Block& gap) {
  if (block.element_count() == 0) {
    return false;
  }
  for (std::size_t d = 0; d < gap.start.size(); ++d) {
    if (end_of(block, d) != gap.start[d] && block.start[d] != end_of(gap, d)) {
      continue;
    }
    bool meets = true;
    for (std::size_t other = 0; other < gap.start.size(); ++other) {
      meets = meets && (other == d || (block.start[other] < end_of(gap, other) &&
                                       gap.start[other] < end_of(block, other)));
    }
    if (meets) {
      return true;
    }
  }
  return false;
}

// The first cell (row-major) that no block holds, as a block of the compressed grid the blocks'
// edges cut the array into; nullopt when that grid has over `limit` cells.
std::optional<Block> first_gap(const Shape& global_shape, const std::vector<Block>& blocks,
                               std::uint64_t limit) {
  const std::size_t dimensions = global_shape.size();
  std::vector<std::vector<std::uint64_t>> cuts(dimensions);
  std::uint64_t cells = 1;
  for (std::size_t d = 0; d < dimensions; ++d) {
    cuts[d] = {0, global_shape[d]};
    for (const auto& block : blocks) {
      cuts[d].push_back(block.start[d]);
      cuts[d].push_back(end_of(block, d));
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
    cells *= cuts[d].size() - 1;
    if (cells > limit) {
      return std::nullopt;
    }
  }
  // Mark what each block holds in the compressed grid (no overlaps: each cell once).
  auto index_of = [&](std::size_t d, std::uint64_t value) {
    return static_cast<std::uint64_t>(std::lower_bound(cuts[d].begin(), cuts[d].end(), value) -
                                      cuts[d].begin());
  };
  std::vector<bool> held(cells, false);
  for (const auto& block : blocks) {
    if (block.element_count() == 0) {
      continue;
    }
    Block range{Shape(dimensions), Shape(dimensions)};
    for (std::size_t d = 0; d < dimensions; ++d) {
      range.start[d] = index_of(d, block.start[d]);
      range.count[d] = index_of(d, end_of(block, d)) - range.start[d];
    }
    for_each_cell(range, [&](const Shape& cell) { held[flat_index(cuts, cell)] = true; });
  }
  std::optional<Block> gap;
  for_each_cell(Block{Shape(dimensions, 0), compressed_shape(cuts)}, [&](const Shape& cell) {
    if (!gap && !held[flat_index(cuts, cell)]) {
      gap = Block{Shape(dimensions), Shape(dimensions)};
      for (std::size_t d = 0; d < dimensions; ++d) {
        gap->start[d] = cuts[d][cell[d]];
        gap->count[d] = cuts[d][cell[d] + 1] - cuts[d][cell[d]];
      }
    }
  });
  return gap;
}

// With no overlap, the blocks tile the array when they hold as many cells as it has.
void check_coverage(const std::string& array, const Shape& global_shape,
                    const std::vector<Block>& blocks) {
  std::uint64_t held = 0;
  for (const auto& block : blocks) {
    held += block.element_count();
  }
  const std::uint64_t cells = element_count(global_shape);
  if (held == cells) {
    return;
  }
  std::string message = "global array '" + array + "' of shape " + shape_to_string(global_shape) +
                        ": the blocks of the " + std::to_string(blocks.size()) + " ranks hold " +
                        std::to_string(held) + " of its " + std::to_string(cells) + " elements";
  constexpr std::uint64_t kLargestGrid = std::uint64_t{1} << 24;
  if (const auto gap = first_gap(global_shape, blocks, kLargestGrid)) {
    message += "; no rank's block holds " + block_to_string(*gap);
    std::string next_to;
    for (std::size_t rank = 0; rank < blocks.size(); ++rank) {
      if (touches(blocks[rank], *gap)) {
        next_to += (next_to.empty() ? "" : ", ") + std::to_string(rank);
      }
    }
    if (!next_to.empty()) {
      message += " (next to the blocks of ranks " + next_to + ")";
    }
  }
  throw UsageError(message);
}

}  // namespace

Block intersection(const Block& a, const Block& b) {
  Block both{Shape(a.start.size(), 0), Shape(a.start.size(), 0)};
  for (std::size_t d = 0; d < a.start.size(); ++d) {
    const std::uint64_t low = std::max(a.start[d], b.start[d]);
    const std::uint64_t high = std::min(end_of(a, d), end_of(b, d));
    both.start[d] = low;
    both.count[d] = high > low ? high - low : 0;
  }
  return both;
}

std::string block_to_string(const Block& block) {
  std::string text = "[";
  for (std::size_t d = 0; d < block.start.size(); ++d) {
    text += (d == 0 ? "" : ", ") + std::to_string(block.start[d]) + ":" +
            std::to_string(end_of(block, d));
  }
  return text + "]";
}

std::vector<int> process_grid(int ranks, std::size_t dimensions) {
  if (ranks < 1 || dimensions == 0) {
    throw UsageError("a process grid needs at least one rank and one dimension (got " +
                     std::to_string(ranks) + " ranks, " + std::to_string(dimensions) +
                     " dimensions)");
  }
  // Each prime factor, largest first, goes to the dimension with the fewest ranks so far.
  std::vector<int> grid(dimensions, 1);
  for (const int factor : prime_factors(ranks)) {
    *std::min_element(grid.begin(), grid.end()) *= factor;
  }
  std::sort(grid.rbegin(), grid.rend());
  return grid;
}

Block grid_block(const Shape& global_shape, const std::vector<int>& grid, int rank) {
  const int ranks = std::accumulate(grid.begin(), grid.end(), 1, std::multiplies<>());
  if (grid.size() != global_shape.size() || rank < 0 || rank >= ranks) {
    throw UsageError("grid_block: rank " + std::to_string(rank) + " of a grid of " +
                     std::to_string(grid.size()) + " dimensions and " + std::to_string(ranks) +
                     " ranks, for an array of " + std::to_string(global_shape.size()) +
                     " dimensions");
  }
  Block block{Shape(grid.size(), 0), Shape(grid.size(), 0)};
  // Row-major: the last dimension's coordinate varies fastest.
  int rest = rank;
  for (std::size_t d = grid.size(); d-- > 0;) {
    const auto parts = static_cast<std::uint64_t>(grid[d]);
    const auto coordinate = static_cast<std::uint64_t>(rest % grid[d]);
    rest /= grid[d];
    const std::uint64_t base = global_shape[d] / parts;
    const std::uint64_t extra = global_shape[d] % parts;
    block.count[d] = base + (coordinate < extra ? 1 : 0);
    block.start[d] = coordinate * base + std::min(coordinate, extra);
  }
  return block;
}

Block balanced_block(const Shape& global_shape, int ranks, int rank) {
  if (global_shape.empty()) {
    throw UsageError("a global array needs at least one dimension");
  }
  return grid_block(global_shape, process_grid(ranks, global_shape.size()), rank);
}

void check_tiling(const std::string& array, const Shape& global_shape,
                  const std::vector<Block>& blocks) {
  check_bounds(array, global_shape, blocks);
  check_overlaps(array, blocks, global_shape.size());
  check_coverage(array, global_shape, blocks);
}

}  // namespace epochrun
