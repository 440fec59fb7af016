"""The integrity header in a checkpoint's HDF5 user block (docs/FORMAT.md, "Inside a file"),
checked as epochrun checks it (src/format/integrity_header.cpp), with the same words, before
h5py parses a byte of the file: its own checksum, the file size, then the hash of all HDF5
metadata (every byte after the user block outside the data extents)."""

import os
import struct

import xxhash

from .errors import CheckpointMismatch, CorruptCheckpoint
from .file_io import read_bytes

_MAGIC = b"EPOCHRUN-CKPT-INTEGRITY\n"
_FIXED = len(_MAGIC) + 5 * 8
_RECORD_MAGIC = b"EPOCHRUN-LAYOUT\n"
_RECORD_HEAD = len(_RECORD_MAGIC) + 4 * 8
_HEADER_VERSION = 1
# A version 2 record begins with the metadata hash of the file it was written into, under the
# record's own checksum: it says which metadata it describes. Version 1 (written from 26 to 28
# November 2026) does not, and its file is read with h5py.
_RECORD_VERSION = 2
_UNBOUND_RECORD_VERSION = 1
_MIN_USER_BLOCK = 512
_MAX_USER_BLOCK = 64 << 20
_FIRST_PAGE = 4096
# The metadata is hashed in pieces of at most this many bytes.
_PIECE = 1 << 20


class IntegrityHeader:
    def __init__(self, user_block_size, file_size, metadata_xxh64, extents, layout_record,
                 record_metadata_xxh64):
        self.user_block_size = user_block_size
        self.file_size = file_size
        self.metadata_xxh64 = metadata_xxh64
        self.extents = extents  # sorted (offset, length) pairs
        self.layout_record = layout_record  # bytes after the metadata hash; empty when none
        # The metadata hash the record was written with, None for a version 1 record.
        self.record_metadata_xxh64 = record_metadata_xxh64


def _u64(data, at):
    return struct.unpack_from("<Q", data, at)[0]


def _layout_record_at(data, at):
    """(the record, the metadata hash it was written with): (b"", None) when there is none or
    it is of a later version."""
    if len(data) < at + _RECORD_HEAD or data[at : at + len(_RECORD_MAGIC)] != _RECORD_MAGIC:
        return b"", None
    head = at + len(_RECORD_MAGIC)
    version, length, record_xxh64, head_xxh64 = struct.unpack_from("<4Q", data, head)
    if head_xxh64 != xxhash.xxh64_intdigest(data[at : head + 24]):
        raise CorruptCheckpoint("integrity header: the layout record's head is damaged")
    if version not in (_RECORD_VERSION, _UNBOUND_RECORD_VERSION):
        return b"", None  # a later epochrun's: the layout is read from the HDF5 metadata anyway
    begin = at + _RECORD_HEAD
    if length > len(data) - begin:
        raise CorruptCheckpoint("integrity header: the layout record does not fit its user block")
    record = data[begin : begin + length]
    if xxhash.xxh64_intdigest(record) != record_xxh64:
        raise CorruptCheckpoint("integrity header: the layout record's checksum does not match")
    if version == _UNBOUND_RECORD_VERSION:
        return record, None
    if len(record) < 8:
        raise CorruptCheckpoint(
            "integrity header: the layout record is too short for the metadata hash it begins with"
        )
    return record[8:], _u64(record, 0)


def decode_integrity_header(data, actual_file_size):
    """The header in a user block's bytes (at least its first 512) of a file of
    `actual_file_size` bytes; CorruptCheckpoint naming what is wrong."""
    if len(data) < _FIXED or data[: len(_MAGIC)] != _MAGIC:
        raise CorruptCheckpoint(
            "no epochrun integrity header (not an epochrun checkpoint, or its first bytes are "
            "damaged)"
        )
    version, size, file_size, metadata_xxh64, count = struct.unpack_from("<5Q", data, len(_MAGIC))
    # Only what locating the header's own checksum needs is checked before that checksum, so
    # that a damaged header always reads as damage (never as, say, a newer version).
    if size < _MIN_USER_BLOCK or size > _MAX_USER_BLOCK or size & (size - 1):
        raise CorruptCheckpoint(f"integrity header: invalid user block size {size}")
    if size > actual_file_size or size > len(data):
        raise CorruptCheckpoint("integrity header: user block larger than the file")
    if count > (size - _FIXED - 8) // 16:
        raise CorruptCheckpoint(f"integrity header: {count} extents cannot fit its user block")
    hashed = _FIXED + 16 * count
    if _u64(data, hashed) != xxhash.xxh64_intdigest(data[:hashed]):
        raise CorruptCheckpoint("integrity header: its own checksum does not match (damaged header)")
    if version != _HEADER_VERSION:
        raise CheckpointMismatch(
            f"integrity header version {version} is not the version this epochrun reads "
            f"({_HEADER_VERSION})"
        )
    if file_size != actual_file_size:
        raise CorruptCheckpoint(
            f"the file has {actual_file_size} bytes, {file_size} were committed (truncated or "
            "extended)"
        )
    extents = []
    previous_end = size
    for i in range(count):
        offset, length = struct.unpack_from("<2Q", data, _FIXED + 16 * i)
        if offset < previous_end or length > actual_file_size or offset > actual_file_size - length:
            raise CorruptCheckpoint(
                f"integrity header: data extent {i} is out of order or outside the file"
            )
        previous_end = offset + length
        extents.append((offset, length))
    record, record_metadata_xxh64 = _layout_record_at(data[:size], hashed + 8)
    return IntegrityHeader(size, file_size, metadata_xxh64, extents, record, record_metadata_xxh64)


def read_integrity_header(fd, what):
    file_size = os.fstat(fd).st_size
    data = read_bytes(fd, 0, min(_FIRST_PAGE, file_size), what)
    if len(data) >= _FIXED and data[: len(_MAGIC)] == _MAGIC:
        size = _u64(data, len(_MAGIC) + 8)
        if len(data) < size <= min(_MAX_USER_BLOCK, file_size):
            data += read_bytes(fd, len(data), size - len(data), what)
    return decode_integrity_header(data, file_size)


def check_metadata_hash(fd, header, what):
    """CorruptCheckpoint unless the bytes outside the user block and the data extents hash to
    what the header recorded at commit."""
    state = xxhash.xxh64()

    def hash_range(begin, end):
        while begin < end:
            size = min(end - begin, _PIECE)
            state.update(read_bytes(fd, begin, size, what))
            begin += size

    position = header.user_block_size
    for offset, length in header.extents:
        hash_range(position, offset)
        position = offset + length
    hash_range(position, header.file_size)
    if state.intdigest() != header.metadata_xxh64:
        raise CorruptCheckpoint("its HDF5 metadata does not match the checksum recorded at commit")
