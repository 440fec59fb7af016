"""A global array, whole or any part a numpy index names, read from its dataset and verified
writer block by writer block (docs/FORMAT.md: a block's xxh64 is that of the block in its own
row-major order). The whole rows that the blocks the index meets span are read into one array
(file_io.read_hashing), which is returned whole or indexed; a block that is one run of bytes there
(a band of whole rows, a 1-D block) is hashed as it is read, any other from one numpy copy.
A verification that keeps no bytes (verify_global_array) reads the dataset once, front to back,
through one small buffer, for every writer block at once."""

import numpy as np
import xxhash

from .file_io import check_checksum, read_array, read_into, xxh64_of
from .layout import NUMPY_DTYPES, value_bytes


def block_text(start, count):
    """A block as epochrun writes one, "[0:4, 8:16]" (src/base/global_array.cpp)."""
    return "[" + ", ".join(f"{s}:{s + c}" for s, c in zip(start, count)) + "]"


def _expand(key, ndim):
    """The index as one entry per dimension (numpy's None kept in place), or None when it is
    not one of ints, slices, integer arrays and 1-D boolean masks with at most one Ellipsis."""
    key = key if isinstance(key, tuple) else (key,)
    ellipses = sum(1 for k in key if k is Ellipsis)
    indexed = sum(0 if k is Ellipsis or k is None else 1 for k in key)
    if ellipses > 1 or indexed > ndim:
        return None
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (ndim - indexed))
        else:
            expanded.append(k)
    if not ellipses:
        expanded.extend([slice(None)] * (ndim - indexed))
    for k in expanded:
        if k is None or isinstance(k, (slice, int, np.integer)):
            continue
        array = np.asarray(k)
        if not (np.issubdtype(array.dtype, np.integer) or (array.dtype == bool and array.ndim == 1)):
            return None
    return expanded


def _touched(entry, n):
    """The indices of a dimension of length n that one entry touches (IndexError as numpy)."""
    if isinstance(entry, slice):
        return np.arange(n)[entry]
    return np.arange(n)[np.asarray(entry)].reshape(-1)


def _rows_entry(entry, n, first):
    """The first dimension's entry, for a region that starts at row `first`."""
    if isinstance(entry, slice):
        start, stop, step = entry.indices(n)
        stop -= first
        return slice(start - first, None if stop < 0 else stop, step)
    array = np.asarray(entry)
    if array.dtype == bool:
        return np.nonzero(array)[0] - first
    return np.arange(n)[array] - first


def read_global_array(fd, array, key, verify, context, file):
    """The part `key` (None: all) of global array `array` (an ArrayLayout) of the file open as
    `fd`; every writer block the part meets is verified unless `verify` is false."""
    shape = array.shape
    dtype = NUMPY_DTYPES[array.dtype]
    expanded = None if key is None else _expand(key, len(shape))
    if expanded is None:
        lows, highs = [0] * len(shape), list(shape)
    else:
        touched = [_touched(k, n) for k, n in zip((k for k in expanded if k is not None), shape)]
        if any(t.size == 0 for t in touched):
            return np.empty(shape, dtype=dtype)[key]  # nothing to read
        lows = [int(t.min()) for t in touched]
        highs = [int(t.max()) + 1 for t in touched]
    met = [
        w
        for w, (start, count) in enumerate(array.blocks)
        if all(s < h and l < s + c for s, c, l, h in zip(start, count, lows, highs))
    ]
    # Whole rows, of every block met: a block is verified whole.
    first, last = lows[0], highs[0]
    if verify and met:
        first = min(array.blocks[w][0][0] for w in met)
        last = max(array.blocks[w][0][0] + array.blocks[w][1][0] for w in met)
    row_bytes = value_bytes(array.dtype, shape[1:])
    what = f"{context}: dataset {array.path}"
    # A block of whole rows (a band, or any block of a 1-D array) lies in the region as one run
    # of bytes, hashed as it is read; any other block is gathered and hashed once it is read.
    bands = [w for w in met if verify and array.blocks[w][1][1:] == shape[1:]]
    ranges = [((array.blocks[w][0][0] - first) * row_bytes,
               (array.blocks[w][0][0] - first + array.blocks[w][1][0]) * row_bytes) for w in bands]
    region, digests = read_array(fd, array.offset + first * row_bytes, dtype,
                                 (last - first,) + shape[1:], what, ranges)
    digests = dict(zip(bands, digests))
    if verify:
        for w in met:
            start, count = array.blocks[w]
            cells = (slice(start[0] - first, start[0] - first + count[0]),) + tuple(
                slice(s, s + c) for s, c in zip(start[1:], count[1:])
            )
            actual = digests[w] if w in digests else xxh64_of(region[cells])
            check_checksum(actual, array.checksums[w],
                           f"{what}, writer block {w} {block_text(start, count)}",
                           file=file, blob="arrays/" + array.name)
    if key is None:
        return region
    if expanded is None:
        return region[key]  # the whole array was read
    rows = next(i for i, k in enumerate(expanded) if k is not None)
    expanded[rows] = _rows_entry(expanded[rows], shape[0], first)
    result = region[tuple(expanded)]
    if isinstance(result, np.ndarray) and result.base is not None and result.nbytes < region.nbytes:
        result = result.copy()  # a small part does not keep the whole region alive
    return result


def verify_global_array(fd, array, scratch, context, file):
    """Verifies every writer block of global array `array` (an ArrayLayout) of the file open as
    `fd`, as epochrun's verify_array_v3 does and in its words, keeping none of its bytes: the
    dataset is read once, front to back, in bands of whole rows of at most len(scratch) bytes
    into `scratch` (a bytearray, reused), and each block's part of a band is fed to that block's
    hash (a band of whole rows is one run of bytes; any other part is copied out of the band,
    which is in the CPU cache). A block of no cells is not checked. CorruptCheckpoint for the
    first block, in writer order, that does not match; a row larger than `scratch` is verified
    block by block through read_global_array."""
    shape = array.shape
    dtype = np.dtype(NUMPY_DTYPES[array.dtype])
    what = f"{context}: dataset {array.path}"
    row_bytes = value_bytes(array.dtype, shape[1:])
    blocks = [(w, start, count) for w, (start, count) in enumerate(array.blocks)
              if all(c > 0 for c in count)]
    if not shape or row_bytes > len(scratch):
        for _, start, count in blocks:
            index = tuple(slice(s, s + c) for s, c in zip(start, count))
            read_global_array(fd, array, index or None, True, context, file)
        return
    states = {w: xxhash.xxh64() for w, _, _ in blocks}
    rows_per_band = max(1, len(scratch) // max(row_bytes, 1))
    view = memoryview(scratch)
    for first in range(0, shape[0] if row_bytes else 0, rows_per_band):
        last = min(shape[0], first + rows_per_band)
        size = (last - first) * row_bytes
        read_into(fd, array.offset + first * row_bytes, view[:size], what)
        band = np.frombuffer(scratch, dtype=dtype, count=size // dtype.itemsize).reshape(
            (last - first,) + shape[1:])
        for w, start, count in blocks:
            low, high = max(first, start[0]), min(last, start[0] + count[0])
            if low < high:
                cells = (slice(low - first, high - first),) + tuple(
                    slice(s, s + c) for s, c in zip(start[1:], count[1:]))
                states[w].update(memoryview(np.ascontiguousarray(band[cells])).cast("B"))
        del band  # the next band is read over the same buffer
    for w, start, count in blocks:
        check_checksum(states[w].intdigest(), array.checksums[w],
                       f"{what}, writer block {w} {block_text(start, count)}",
                       file=file, blob="arrays/" + array.name)
