"""A version 3 file's layout record (docs/FORMAT.md, "The layout record"): the layout its writer
keeps in the user block, under a checksum of its own, which a resume reads instead of the HDF5
metadata (src/format/stored_file_codec.cpp, checkpoint_layout_v3_reader.cpp). Read the way a
load reads it -- the header, the record, then the checksum table and the ragged rows by offset,
no h5py and no metadata hash -- it is how latest() judges an epoch as a resume judges it; beside
the HDF5 side, it must say what the metadata says."""

import struct

import numpy as np

from .errors import CorruptCheckpoint
from .file_io import read_bytes
from .layout import (KINDS, NUMPY_DTYPES, BlobV3, Layout, StoredV3, assemble_v3, check_tiling,
                     checksum_count, value_bytes)

_DTYPES = ["f32", "f64", "i32", "i64", "u8", "bytes"]
_MAX_DIMENSIONS = 32


def _fail(what):
    raise CorruptCheckpoint(f"its layout record {what}")


class _Reader:
    """Little-endian u64 numbers, and strings and lists each after their length."""

    def __init__(self, data):
        self.data = data
        self.at = 0

    def number(self):
        if self.at + 8 > len(self.data):
            _fail("ends early")
        self.at += 8
        return struct.unpack_from("<Q", self.data, self.at - 8)[0]

    def text(self):
        size = self.number()
        if size > len(self.data) - self.at:
            _fail("ends early")
        self.at += size
        return self.data[self.at - size : self.at].decode("utf-8", errors="replace")

    def length(self):
        count = self.number()
        if count > len(self.data) - self.at:
            _fail("ends early")
        return count

    def numbers(self):
        count = self.number()
        if count > (len(self.data) - self.at) // 8:
            _fail("ends early")
        self.at += 8 * count
        return tuple(struct.unpack_from(f"<{count}Q", self.data, self.at - 8 * count))


def decode(record):
    """(root, blobs, layout) of a record: root {epoch, job, node_names, config_json, width},
    blobs [BlobV3] in index order with their writer blocks and dataset offsets, layout {the
    pack's offset and row, the tables' offsets, per_node_blobs, user_block_size, extents}."""
    r = _Reader(record)
    root = {"epoch": r.number(), "job": r.text()}
    root["node_names"] = [r.text() for _ in range(r.length())]
    root["config_json"] = r.text()
    root["width"] = r.number()
    blobs = []
    for _ in range(r.length()):
        name, kind, dtype, shape, ragged_elements = r.text(), r.number(), r.number(), r.numbers(), r.number()
        blocks = [(r.numbers(), r.numbers()) for _ in range(r.length())]
        if kind not in KINDS or dtype >= len(_DTYPES) or len(shape) > _MAX_DIMENSIONS:
            _fail(f"describes blob '{name}' as no writer would")
        blobs.append(BlobV3(name, KINDS[kind], _DTYPES[dtype], shape, 0, blocks=blocks or None,
                            ragged_elements=ragged_elements))
    offsets, packed, in_pack = r.numbers(), [r.number() != 0 for _ in range(r.length())], r.numbers()
    keys = ("pack_offset", "pack_row", "checksums_offset", "per_node_blobs", "ragged_offset",
            "ragged_row_bytes", "user_block_size")
    layout = {key: r.number() for key in keys}
    layout["extents"] = [(r.number(), r.number()) for _ in range(r.length())]
    if r.at != len(record):
        _fail(f"has {len(record) - r.at} bytes too many")
    if not len(offsets) == len(packed) == len(in_pack) == len(blobs):
        _fail("does not match its integrity header")
    for blob, offset, is_packed, at in zip(blobs, offsets, packed, in_pack):
        blob.offset, blob.packed, blob.in_pack = offset, is_packed, at
    return root, blobs, layout


def _blob_bytes(blob, ranks):
    """Sets blob.size as the blob index says it, and returns its dataset's bytes."""
    element = np.dtype(NUMPY_DTYPES[blob.dtype]).itemsize
    if blob.kind == "ragged":
        blob.size = blob.ragged_elements * element
        return blob.size
    blob.size = value_bytes(blob.dtype, blob.shape)
    return blob.size * (ranks if blob.kind == "per-node" else 1)


def read_stored(fd, header, what):
    """The root attributes and StoredV3 of a file from its layout record, everything it says
    checked against the integrity header as epochrun's load checks it."""
    root, blobs, layout = decode(header.layout_record)
    ranks = len(root["node_names"])
    extents = set(header.extents)
    if not ranks or len(set(root["node_names"])) != ranks:
        _fail("names no node, or one node twice")
    if layout["user_block_size"] != header.user_block_size or sorted(layout["extents"]) != sorted(header.extents):
        _fail("does not match its integrity header")
    names = [blob.name for blob in blobs]
    if names != sorted(set(names)):
        _fail("does not list its blobs sorted by name, once each")
    for blob in blobs:
        nbytes = _blob_bytes(blob, ranks)
        if (blob.kind == "global array") != bool(blob.blocks) or (blob.packed and blob.kind != "per-node"):
            _fail(f"describes blob '{blob.name}' as no writer would")
        if blob.blocks:
            check_tiling(blob.name, blob.shape, blob.blocks, "layout record")
        if not blob.packed and nbytes and (blob.offset, nbytes) not in extents:
            _fail(f"places blob '{blob.name}' outside the data extents of its integrity header")
    if layout["per_node_blobs"] != sum(1 for b in blobs if b.kind in ("per-node", "ragged")):
        _fail(f"counts {layout['per_node_blobs']} per-node blobs, not "
              f"{sum(1 for b in blobs if b.kind in ('per-node', 'ragged'))}")
    if any(blob.packed for blob in blobs) and (layout["pack_offset"], ranks * layout["pack_row"]) not in extents:
        _fail("places the pack outside the data extents of its integrity header")
    count = checksum_count(blobs, ranks)
    checksums = np.zeros(0, dtype=np.uint64)
    if count:
        if (layout["checksums_offset"], 8 * count) not in extents:
            _fail("places the checksum table outside the data extents of its integrity header")
        checksums = np.frombuffer(read_bytes(fd, layout["checksums_offset"], 8 * count,
                                             f"{what}: checksum table /index/xxh64"), dtype="<u8")
    ragged_blobs = sum(1 for blob in blobs if blob.kind == "ragged")
    ragged = []
    if ragged_blobs:
        width = root["width"]
        row_bytes = layout["ragged_row_bytes"]
        if row_bytes != 1 + 8 * width + 16:
            _fail(f"gives the ragged index rows of {row_bytes} bytes")
        if (layout["ragged_offset"], ragged_blobs * ranks * row_bytes) not in extents:
            _fail("places the ragged index outside the data extents of its integrity header")
        rows = read_bytes(fd, layout["ragged_offset"], ragged_blobs * ranks * row_bytes,
                          f"{what}: ragged index /index/ragged")
        entries = []
        for at in range(0, len(rows), row_bytes):
            ndim = rows[at]
            if ndim > width:
                raise CorruptCheckpoint(f"ragged index /index/ragged: a row of {ndim} dimensions")
            values = struct.unpack_from(f"<{width + 2}Q", rows, at + 1)
            entries.append((tuple(values[:ndim]), values[width], values[width + 1]))
        ragged = [entries[k * ranks : (k + 1) * ranks] for k in range(ragged_blobs)]
    return root, StoredV3(blobs, layout["pack_offset"], layout["pack_row"], checksums, ragged)


def layout_from_record(fd, header, what):
    """The Layout of a version 3 file from its layout record alone, as a resume reads it."""
    root, stored = read_stored(fd, header, what)
    layout = Layout()
    layout.format_version = 3
    layout.epoch, layout.job = root["epoch"], root["job"]
    layout.node_names, layout.config_json = root["node_names"], root["config_json"]
    assemble_v3(layout, stored)
    return layout


def check_matches(fd, header, layout, stored, what):
    """CorruptCheckpoint unless the file's layout record, when it has one, says what its HDF5
    metadata says (`layout` and `stored` as read with h5py): a resume, which trusts the record,
    reads what a reader of the HDF5 side reads."""
    if not header.layout_record:
        return
    root, recorded = read_stored(fd, header, what)

    def described(blobs):
        return [(b.name, b.kind, b.dtype, tuple(b.shape), b.size, b.packed, b.in_pack, b.offset,
                 b.blocks) for b in blobs]

    same = (
        (root["epoch"], root["job"], root["node_names"], root["config_json"])
        == (layout.epoch, layout.job, layout.node_names, layout.config_json)
        and described(recorded.blobs) == described(stored.blobs)
        and (recorded.pack_offset, recorded.pack_row) == (stored.pack_offset, stored.pack_row)
        and np.array_equal(recorded.checksums, stored.checksums)
        and recorded.ragged == stored.ragged
    )
    if not same:
        raise CorruptCheckpoint("its layout record does not match its HDF5 metadata")
