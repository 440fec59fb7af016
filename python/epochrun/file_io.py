"""Reading a checkpoint file's bytes: straight into the memory that is returned (preadv into a
numpy array's buffer), never through an intermediate copy, and hashed with xxhash over that
buffer -- no Python runs per element, so a large value costs what the read and the hash cost in
C. A value of more than one piece is read piece by piece on a thread of its own while this one
hashes the pieces already read (os.preadv lets go of the GIL): the hash then costs about no time
beside the read, as epochrun's own reader hashes each piece as it arrives. A large value gets
memory of its own in 4 KiB pages, as epochrun's own loads do (fresh_array). A verification that
keeps no bytes reads them through one small buffer it reuses (hash_range)."""

import mmap
import os
import stat
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xxhash

from .errors import CorruptCheckpoint


def open_checkpoint_file(path):
    """A descriptor of the regular file at `path`, opened as epochrun opens one: without
    following a symlink or waiting on a FIFO (O_NOFOLLOW | O_NONBLOCK)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptCheckpoint(f"{path} is not a regular file", file=path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_into(fd, offset, buffer, what):
    """Fills `buffer` (a writable bytes-like object) from `offset`; a file that ends first is
    damaged, in the words of epochrun's own read."""
    view = memoryview(buffer).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise CorruptCheckpoint(f"{what}: short read at byte {offset + done}")
        done += got


# Bytes per read of a large value: large enough that a piece costs one system call's overhead
# in thousands, small enough that the hashing follows the reading closely.
PIECE = 8 << 20
# Bytes per read of a verification that keeps none of them (hash_range), into one buffer: small
# enough to stay in the CPU cache between the read and the hash (epochrun's kVerifyPiece,
# src/checkpoint/load/verified_read.hpp).
VERIFY_PIECE = 1 << 20
# An array from this size on is an anonymous private mapping of its own, of 4 KiB pages as
# epochrun's blobs are (src/base/blob.cpp), not numpy's memory: numpy asks for transparent huge
# pages for a large array (madvise MADV_HUGEPAGE), and on a virtual machine that reports free
# memory to its host a huge page is mostly one the host must fault in again. A verified array()
# of 768 MiB from the page cache took 0.34 to 2.23 s (median 1.30) in numpy's memory and 0.40 to
# 0.61 s (median 0.52) in a mapping of its own, in 11 alternated runs in fresh processes; making
# each piece's pages resident before its read (MADV_POPULATE_WRITE) gained nothing there
# (median 0.54). Smaller arrays come from numpy's heap.
_MAPPED_FROM = 1 << 20


def read_hashing(fd, offset, buffer, ranges, what):
    """Fills `buffer` from `offset` of the file open as `fd` and returns the xxh64 of each
    (begin, end) byte range of it in `ranges`, hashed while the later pieces are read."""
    view = memoryview(buffer).cast("B")
    if len(view) <= PIECE:
        read_into(fd, offset, view, what)
        return [xxhash.xxh64_intdigest(view[begin:end]) for begin, end in ranges]
    states = [xxhash.xxh64() for _ in ranges]
    pieces = [(at, min(at + PIECE, len(view))) for at in range(0, len(view), PIECE)]
    with ThreadPoolExecutor(max_workers=1) as reader:
        reads = [reader.submit(read_into, fd, offset + a, view[a:b], what) for a, b in pieces]
        try:
            for (a, b), read in zip(pieces, reads):
                read.result()
                for (begin, end), state in zip(ranges, states):
                    if max(a, begin) < min(b, end):
                        state.update(view[max(a, begin) : min(b, end)])
        except BaseException:
            for read in reads:
                read.cancel()  # a short read: the pieces after it are not read for nothing
            raise
    return [state.intdigest() for state in states]


def read_bytes(fd, offset, size, what):
    buffer = bytearray(size)
    read_into(fd, offset, buffer, what)
    return bytes(buffer)


def hash_range(fd, offset, size, scratch, state, what):
    """Feeds `size` bytes from `offset` of the file open as `fd` to `state` (an xxhash.xxh64),
    read in pieces of len(scratch) into `scratch` (a bytearray, reused), each hashed while it
    is still in the CPU cache."""
    view = memoryview(scratch)
    while size > 0:
        piece = view[: min(size, len(view))]
        read_into(fd, offset, piece, what)
        state.update(piece)
        offset += len(piece)
        size -= len(piece)


def fresh_array(dtype, shape):
    """An uninitialised array of `dtype` and `shape`: numpy's below _MAPPED_FROM bytes, a
    mapping of its own from there on."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.uint64)) * dtype.itemsize
    if nbytes < _MAPPED_FROM:
        return np.empty(shape, dtype=dtype)
    # Private: a shared anonymous mapping would be shared memory (tmpfs pages), not the
    # process's own. The array holds the mapping: it is unmapped with the last view of it.
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)


def read_array(fd, offset, dtype, shape, what, ranges=()):
    """An array of `dtype` and `shape` read from `offset` into its own buffer, and the xxh64 of
    each (begin, end) byte range of it in `ranges` (read_hashing)."""
    array = fresh_array(dtype, shape)
    return array, read_hashing(fd, offset, array.reshape(-1).view(np.uint8), ranges, what)


def xxh64_of(array):
    """The xxh64 (seed 0) of an array's bytes in row-major order, as epochrun hashes a value."""
    return xxhash.xxh64_intdigest(memoryview(np.ascontiguousarray(array)).cast("B"))


def check_checksum(actual, stored, what, **names):
    """CorruptCheckpoint in epochrun's words (src/checkpoint/load/verified_read.cpp) unless the
    value hashes to what its save recorded."""
    if actual != stored:
        raise CorruptCheckpoint(
            f"{what}: checksum mismatch (stored xxh64 {stored}, data hashes to {actual})", **names
        )
