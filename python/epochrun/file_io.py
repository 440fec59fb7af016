"""Reading a checkpoint file's bytes: straight into the memory that is returned (preadv into a
numpy array's buffer), never through an intermediate copy, and hashed with xxhash's one-shot
digest over that buffer -- no Python loop runs per element, so a large array costs what the
read and the hash cost in C."""

import os
import stat

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


def read_bytes(fd, offset, size, what):
    buffer = bytearray(size)
    read_into(fd, offset, buffer, what)
    return bytes(buffer)


def read_array(fd, offset, dtype, shape, what):
    """An array of `dtype` and `shape` read from `offset`, its buffer filled by the read."""
    array = np.empty(shape, dtype=dtype)
    if array.nbytes:
        read_into(fd, offset, array.reshape(-1).view(np.uint8), what)
    return array


def xxh64_of(array):
    """The xxh64 (seed 0) of an array's bytes in row-major order, as epochrun hashes a value."""
    return xxhash.xxh64_intdigest(memoryview(np.ascontiguousarray(array)).cast("B"))


def check_checksum(actual, stored, what, **names):
    """CorruptCheckpoint in epochrun's words (src/checkpoint/verified_read.cpp) unless the
    value hashes to what its save recorded."""
    if actual != stored:
        raise CorruptCheckpoint(
            f"{what}: checksum mismatch (stored xxh64 {stored}, data hashes to {actual})", **names
        )
