"""Whether a global array's writer blocks tile its shape exactly, checked as epochrun checks it
(check_tiling in src/base/global_array.cpp) and refused in its words: every block inside the
shape, no two blocks overlapping, and together as many cells as the shape -- the first gap named
when the grid the blocks' edges cut the array into is small enough to search."""

import math
from bisect import bisect_left

import numpy as np

from .errors import CorruptCheckpoint

# The most cells of that grid searched for a gap: epochrun's bound.
_LARGEST_GRID = 1 << 24


def _text(numbers):
    return "[" + ", ".join(str(n) for n in numbers) + "]"


def _block(start, count):
    return "[" + ", ".join(f"{s}:{s + c}" for s, c in zip(start, count)) + "]"


def _rank_block(blocks, rank):
    return f"rank {rank}'s block {_block(*blocks[rank])}"


def _check_bounds(name, shape, blocks):
    for rank, (start, count) in enumerate(blocks):
        if len(start) != len(shape) or len(count) != len(shape):
            raise ValueError(f"global array '{name}': rank {rank}'s block has {len(start)} "
                             f"dimensions, the array {len(shape)}")
        if any(c > n or s > n - c for s, c, n in zip(start, count, shape)):
            raise ValueError(f"global array '{name}' of shape {_text(shape)}: "
                             f"{_rank_block(blocks, rank)} reaches outside it")


def _check_overlaps(name, shape, blocks):
    """Sweeps the non-empty blocks along the dimension whose starts differ most, comparing only
    those whose ranges along it meet, as epochrun does."""
    if not shape:
        return
    d = max(range(len(shape)), key=lambda k: (len({s[k] for s, _ in blocks}), -k))
    order = sorted((rank for rank, (_, count) in enumerate(blocks) if math.prod(count)),
                   key=lambda rank: (blocks[rank][0][d], rank))
    for i, a in enumerate(order):
        start, count = blocks[a]
        for b in order[i + 1 :]:
            if blocks[b][0][d] >= start[d] + count[d]:
                break
            low = [max(x, y) for x, y in zip(start, blocks[b][0])]
            high = [min(x + c, y + e) for x, c, y, e in zip(start, count, *blocks[b])]
            if all(h > l for l, h in zip(low, high)):
                both = _block(low, [h - l for l, h in zip(low, high)])
                raise ValueError(f"global array '{name}': {_rank_block(blocks, min(a, b))} and "
                                 f"{_rank_block(blocks, max(a, b))} overlap in {both}")


def _first_gap(shape, blocks):
    """The first cell (row-major) no block holds, as a block of the grid the blocks' edges cut
    the array into; None when that grid has more than _LARGEST_GRID cells."""
    cuts = []
    cells = 1
    for d, n in enumerate(shape):
        cuts.append(sorted({0, n} | {s[d] for s, _ in blocks} | {s[d] + c[d] for s, c in blocks}))
        cells *= len(cuts[-1]) - 1
        if cells > _LARGEST_GRID:
            return None
    held = np.zeros([len(c) - 1 for c in cuts], dtype=bool)
    for start, count in blocks:
        if math.prod(count):
            held[tuple(slice(bisect_left(c, s), bisect_left(c, s + n))
                       for c, s, n in zip(cuts, start, count))] = True
    free = np.flatnonzero(~held.reshape(-1))
    if not free.size:
        return None
    cell = np.unravel_index(free[0], held.shape)
    return ([c[i] for c, i in zip(cuts, cell)], [c[i + 1] - c[i] for c, i in zip(cuts, cell)])


def _touches(block, gap):
    """Whether `block` ends where `gap` starts, or starts where it ends, along one dimension
    while meeting it along the others."""
    (start, count), (gap_start, gap_count) = block, gap
    if not math.prod(count):
        return False
    dims = range(len(gap_start))
    for d in dims:
        if start[d] + count[d] != gap_start[d] and start[d] != gap_start[d] + gap_count[d]:
            continue
        if all(o == d or (start[o] < gap_start[o] + gap_count[o]
                          and gap_start[o] < start[o] + count[o]) for o in dims):
            return True
    return False


def _check_coverage(name, shape, blocks):
    held = sum(math.prod(count) for _, count in blocks)
    cells = math.prod(shape)
    if held == cells:
        return
    message = (f"global array '{name}' of shape {_text(shape)}: the blocks of the {len(blocks)} "
               f"ranks hold {held} of its {cells} elements")
    gap = _first_gap(shape, blocks)
    if gap is not None:
        message += f"; no rank's block holds {_block(*gap)}"
        next_to = [str(rank) for rank, block in enumerate(blocks) if _touches(block, gap)]
        if next_to:
            message += f" (next to the blocks of ranks {', '.join(next_to)})"
    raise ValueError(message)


def check_tiling(name, shape, blocks, what):
    """CorruptCheckpoint, after `what`, unless the writer blocks [(start, count)] of global
    array `name` tile `shape` exactly."""
    try:
        _check_bounds(name, shape, blocks)
        _check_overlaps(name, shape, blocks)
        _check_coverage(name, shape, blocks)
    except ValueError as error:
        raise CorruptCheckpoint(f"{what}: {error}") from None
