"""Reading a checkpoint file's bytes: a large value is a copy-on-write mapping of the file itself
(map_array) -- its pages are the page cache's until the caller writes one, so returning it costs
what reading the file costs, not a copy into fresh memory as well -- and any other value is read
straight into the memory that is returned (preadv into a numpy array's buffer), never through an
intermediate copy. Either way it is hashed with xxhash over that memory -- no Python runs per
element, so a large value costs what the read and the hash cost in C. A value read rather than
mapped, of more than one piece, is read piece by piece on a thread of its own while this one
hashes the pieces already read (os.preadv lets go of the GIL). A verification that keeps no bytes
reads them through one small buffer it reuses (hash_range)."""

import ctypes
import errno
import mmap
import os
import stat
import weakref
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


# Bytes per read of a large value (or per range of a mapped value made resident): large enough
# that a piece costs one system call's overhead in thousands, small enough that the hashing
# follows the reading closely.
PIECE = 8 << 20
# Bytes per read of a verification that keeps none of them (hash_range), into one buffer: small
# enough to stay in the CPU cache between the read and the hash (epochrun's kVerifyPiece,
# src/checkpoint/load/verified_read.hpp).
VERIFY_PIECE = 1 << 20
# An array from this size on is a mapping: of the file itself where the file lets itself be mapped
# (map_array), else an anonymous private mapping of its own, of 4 KiB pages as epochrun's blobs
# are (src/base/blob.cpp), not numpy's memory: numpy asks for transparent huge pages for a large
# array (madvise MADV_HUGEPAGE), and on a virtual machine that reports free memory to its host a
# huge page is mostly one the host must fault in again. A verified array() of 768 MiB from the
# page cache took 0.34 to 2.23 s (median 1.30) in numpy's memory and 0.40 to 0.61 s (median 0.52)
# in an anonymous mapping of its own, in 11 alternated runs in fresh processes: still 3.5 times
# the read and hash of the same bytes through one small buffer, the cost of faulting in and
# zeroing 196,608 fresh pages, which mapping the file does not pay. Smaller arrays come from
# numpy's heap.
_MAPPED_FROM = 1 << 20


def hash_as_filled(view, fill, ranges):
    """The xxh64 of each (begin, end) byte range in `ranges` of `view` (a memoryview of bytes),
    whose pieces of PIECE bytes `fill(begin, end)` makes ready on a thread of its own while this
    one hashes the pieces already filled."""
    states = [xxhash.xxh64() for _ in ranges]
    pieces = [(at, min(at + PIECE, len(view))) for at in range(0, len(view), PIECE)]
    with ThreadPoolExecutor(max_workers=1) as filler:
        fills = [filler.submit(fill, a, b) for a, b in pieces]
        try:
            for (a, b), filled in zip(pieces, fills):
                filled.result()
                for (begin, end), state in zip(ranges, states):
                    if max(a, begin) < min(b, end):
                        state.update(view[max(a, begin) : min(b, end)])
        except BaseException:
            for filled in fills:
                filled.cancel()  # a short read: the pieces after it are not read for nothing
            raise
    return [state.intdigest() for state in states]


def read_hashing(fd, offset, buffer, ranges, what):
    """Fills `buffer` from `offset` of the file open as `fd` and returns the xxh64 of each
    (begin, end) byte range of it in `ranges`, hashed while the later pieces are read."""
    view = memoryview(buffer).cast("B")
    if len(view) <= PIECE:
        read_into(fd, offset, view, what)
        return [xxhash.xxh64_intdigest(view[begin:end]) for begin, end in ranges]
    return hash_as_filled(view, lambda a, b: read_into(fd, offset + a, view[a:b], what), ranges)


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


def _nbytes(dtype, shape):
    return int(np.prod(shape, dtype=np.uint64)) * np.dtype(dtype).itemsize


def fresh_array(dtype, shape):
    """An uninitialised array of `dtype` and `shape`: numpy's below _MAPPED_FROM bytes, a
    mapping of its own from there on."""
    nbytes = _nbytes(dtype, shape)
    if nbytes < _MAPPED_FROM:
        return np.empty(shape, dtype=dtype)
    # Private: a shared anonymous mapping would be shared memory (tmpfs pages), not the
    # process's own. The array holds the mapping: it is unmapped with the last view of it.
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)


# libc's mmap, not Python's: an mmap.mmap of a file holds a duplicate of its descriptor for as
# long as the mapping lives, and a caller who keeps many arrays would run out of descriptors.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
# madvise(MADV_POPULATE_READ), Linux 5.14 on (the mmap module of Python 3.11 does not name it):
# the pages of a range read in and mapped, waiting for the reads. An older kernel refuses it
# (EINVAL), and the hash then faults the pages in itself.
_MADV_POPULATE_READ = 22


def map_array(fd, offset, dtype, shape, what):
    """An array of `dtype` and `shape` that is a private, writable, copy-on-write mapping of the
    bytes from `offset` of the file open as `fd` (a write to it changes the array, never the
    file), or None where the file cannot be mapped (a file system that refuses mmap). The array
    holds the mapping, not the descriptor: the mapping is unmapped with the last view of the
    array, and the file may be closed and even deleted (pruned) before that. A committed
    checkpoint is never written again, so what the caller reads is what was verified.
    CorruptCheckpoint where the file ends before the value does: a mapping past the end of a
    file would fault (SIGBUS) where a read reports a short file."""
    nbytes = _nbytes(dtype, shape)
    size = os.fstat(fd).st_size
    if offset + nbytes > size:
        raise CorruptCheckpoint(f"{what}: short read at byte {max(offset, size)}")
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    length = offset + nbytes - start
    address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd,
                         start)
    if address in (None, _MAP_FAILED):
        return None
    memory = (ctypes.c_char * length).from_address(address)
    weakref.finalize(memory, _libc.munmap, address, length)
    return np.frombuffer(memory, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize,
                         offset=offset - start).reshape(shape)


def _populate(array, begin, end):
    """The pages of bytes [begin, end) of a mapped array read in and mapped (MADV_POPULATE_READ):
    a disk's read error is an OSError here, as a read's is, not a SIGBUS when the page is touched."""
    address = array.ctypes.data + begin
    aligned = address - address % mmap.PAGESIZE
    if _libc.madvise(aligned, address + (end - begin) - aligned, _MADV_POPULATE_READ) != 0:
        error = ctypes.get_errno()
        if error != errno.EINVAL:
            raise OSError(error, os.strerror(error))


def read_array(fd, offset, dtype, shape, what, ranges=()):
    """An array of `dtype` and `shape` with the bytes from `offset` of the file open as `fd`, and
    the xxh64 of each (begin, end) byte range of it in `ranges`: from _MAPPED_FROM bytes on a
    mapping of the file (map_array), hashed from the mapping; else, or where the file cannot be
    mapped, read into its own buffer (read_hashing)."""
    if _nbytes(dtype, shape) >= _MAPPED_FROM:
        array = map_array(fd, offset, dtype, shape, what)
        if array is not None:
            # The pages read in a piece ahead of the hash, on a thread, as a read would be: a
            # hash that faults them in itself waits for each read-ahead window in turn, and
            # asking for the whole value at once (MADV_WILLNEED) waits for all of it first (768
            # MiB from the disk, medians: 0.58 s this way, 0.63 faulted in by the hash, 0.91
            # asked for whole; the read and hash of it through one buffer, 0.55).
            view = memoryview(array.reshape(-1).view(np.uint8))
            return array, hash_as_filled(view, lambda a, b: _populate(array, a, b), ranges)
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
