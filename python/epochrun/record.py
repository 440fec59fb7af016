"""A version 3 file's layout record (docs/FORMAT.md, "The layout record"): the layout its writer
keeps in the user block, bound to the metadata hash of the file it was written into
(src/format/stored_file_codec.cpp, checkpoint_layout_v3_reader.cpp). The judge (judge.py) reads
a file from its record when the record names the metadata hash just verified -- the record, then
the checksum table and the ragged rows by offset, no h5py -- every claim of the record checked as
epochrun checks it; otherwise the record, when there is one, must say what h5py read."""

import struct

import numpy as np

from .errors import CorruptCheckpoint
from .file_io import read_bytes
from .layout import (KINDS, RAGGED_INDEX, BlobV3, Layout, StoredV3, assemble_v3, check_name,
                     checked_bytes, checksum_count, ragged_values, value_bytes)
from .tiling import check_tiling

_DTYPES = ["f32", "f64", "i32", "i64", "u8", "bytes"]
_MAX_DIMENSIONS = 32
_LAYOUT_KEYS = ("pack_offset", "pack_row", "checksums_offset", "per_node_blobs", "ragged_offset",
                "ragged_row_bytes", "user_block_size")


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
        return self.data[self.at - size : self.at]

    def length(self):
        """A list's length, refused when even one byte per element would not fit."""
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
    """(root, blobs, layout) as the record encodes them, only the encoding checked
    (decode_layout_record): root {epoch, job, node_names, config_json, width}, names as stored
    bytes; blobs [(name, kind, dtype, shape, ragged elements, writer blocks)], kind and dtype as
    stored numbers; layout {offsets, packed, in_pack, _LAYOUT_KEYS, extents}."""
    r = _Reader(record)
    epoch = r.number()
    root = {"epoch": epoch - (1 << 64) if epoch >> 63 else epoch, "job": r.text()}  # an int64
    root["node_names"] = [r.text() for _ in range(r.length())]
    root["config_json"] = r.text().decode("utf-8", errors="replace")
    root["width"] = r.number()
    blobs = [(r.text(), r.number(), r.number(), r.numbers(), r.number(),
              [(r.numbers(), r.numbers()) for _ in range(r.length())])
             for _ in range(r.length())]
    layout = {"offsets": r.numbers(), "packed": [r.number() != 0 for _ in range(r.length())],
              "in_pack": r.numbers()}
    layout.update((key, r.number()) for key in _LAYOUT_KEYS)
    layout["extents"] = [(r.number(), r.number()) for _ in range(r.length())]
    if r.at != len(record):
        _fail(f"has {len(record) - r.at} bytes too many")
    return root, blobs, layout


def _check_root(root):
    """check_record_root: the names, and the ragged index's width."""
    root["job"] = check_name(root["job"], "job name")
    if not root["node_names"]:
        _fail("names no node")
    nodes = []
    seen = set()
    for node in root["node_names"]:
        nodes.append(check_name(node, "node name"))
        if nodes[-1] in seen:
            _fail(f"lists node '{nodes[-1]}' twice")
        seen.add(nodes[-1])
    root["node_names"] = nodes
    if not 1 <= root["width"] <= _MAX_DIMENSIONS:
        _fail(f"has a ragged index of {root['width']} dimensions")


def _no_writer_would(kind, dtype, shape, ragged_elements, blocks, packed):
    return (kind not in KINDS or dtype >= len(_DTYPES) or len(shape) > _MAX_DIMENSIONS
            or (kind == 3 and shape) or (kind == 2 and not shape)
            or (kind != 3 and ragged_elements != 0) or (kind == 2) == (not blocks)
            or (packed and kind != 0))


def _check_blobs(raw, layout, ranks, header, extents):
    """check_record_blob for each blob: its name and place in the order, what it is, its bytes
    inside the file and in a data extent of their own, or its range of a pack row (returned)."""
    blobs = []
    packed = []
    for i, (name, kind, dtype, shape, ragged_elements, blocks) in enumerate(raw):
        name = check_name(name, "blob name")
        if blobs and not blobs[-1].name < name:
            _fail("does not list its blobs sorted by name, once each")
        is_packed = layout["packed"][i]
        if _no_writer_would(kind, dtype, shape, ragged_elements, blocks, is_packed):
            _fail(f"describes blob '{name}' as no writer would")
        blob = BlobV3(name, KINDS[kind], _DTYPES[dtype], shape, 0, is_packed,
                      layout["in_pack"][i], layout["offsets"][i], blocks or None, ragged_elements)
        stored_shape = {"per-node": (ranks,) + shape,
                        "ragged": (ragged_elements,)}.get(blob.kind, shape)
        nbytes = checked_bytes(stored_shape, blob.dtype, header.file_size,
                               f"layout record: blob '{name}'")
        # As the blob index says it: one node's value, or all nodes' of a ragged blob.
        blob.size = nbytes if blob.kind == "ragged" else value_bytes(blob.dtype, shape)
        if blob.blocks:
            check_tiling(name, shape, blob.blocks, "layout record")
        if is_packed:
            packed.append((blob.in_pack, blob.size))
        elif nbytes and (blob.offset, nbytes) not in extents:
            _fail(f"places blob '{name}' outside the data extents of its integrity header")
        blobs.append(blob)
    return blobs, packed


def read_stored(fd, header, what):
    """The root attributes and StoredV3 of a file from its layout record, everything it says
    checked as epochrun checks it (read_checkpoint_layout_from_record), in the same order and
    words."""
    root, raw, layout = decode(header.layout_record)
    _check_root(root)
    ranks = len(root["node_names"])
    if (not len(layout["offsets"]) == len(layout["packed"]) == len(layout["in_pack"]) == len(raw)
            or layout["user_block_size"] != header.user_block_size
            or layout["extents"] != header.extents):
        _fail("does not match its integrity header")
    extents = set(header.extents)
    blobs, packed = _check_blobs(raw, layout, ranks, header, extents)
    per_node = sum(1 for b in blobs if b.kind in ("per-node", "ragged"))
    if layout["per_node_blobs"] != per_node:
        _fail(f"counts {layout['per_node_blobs']} per-node blobs, not {per_node}")
    pack_row = layout["pack_row"]
    if packed:
        previous_end = 0
        for offset, size in sorted(packed):
            if offset < previous_end or offset > pack_row or size > pack_row - offset:
                _fail("has packed blobs that overlap or lie outside the pack's rows")
            previous_end = offset + size
        nbytes = checked_bytes((ranks, pack_row), "u8", header.file_size, "layout record: the pack")
        if (layout["pack_offset"], nbytes) not in extents:
            _fail("places the pack outside the data extents of its integrity header")
    count = checksum_count(blobs, ranks)
    checksums = np.zeros(0, dtype=np.uint64)
    if count:
        nbytes = checked_bytes((count, 1), "i64", header.file_size,
                               "layout record: the checksum table")
        if (layout["checksums_offset"], nbytes) not in extents:
            _fail("places the checksum table outside the data extents of its integrity header")
        checksums = np.frombuffer(read_bytes(fd, layout["checksums_offset"], nbytes,
                                             f"{what}: checksum table /index/xxh64"), dtype="<u8")
    ragged_blobs = [blob for blob in blobs if blob.kind == "ragged"]
    ragged = []
    if ragged_blobs:
        width = root["width"]
        row_bytes = layout["ragged_row_bytes"]
        if row_bytes != 1 + 8 * width + 16:
            _fail(f"gives the ragged index rows of {row_bytes} bytes")
        nbytes = checked_bytes((len(ragged_blobs) * ranks, row_bytes), "u8", header.file_size,
                               f"layout record: {RAGGED_INDEX}")
        if (layout["ragged_offset"], nbytes) not in extents:
            _fail("places the ragged index outside the data extents of its integrity header")
        # The rows as the writer packs them: no padding, little-endian.
        row = np.dtype([("ndim", "u1"), ("shape", "<u8", (width,)), ("offset", "<u8"),
                        ("size", "<u8")])
        rows = np.frombuffer(read_bytes(fd, layout["ragged_offset"], nbytes,
                                        f"{what}: {RAGGED_INDEX}"), dtype=row)
        ragged = ragged_values(rows, width, ragged_blobs, ranks)
    tables = (layout["checksums_offset"], layout["ragged_offset"], layout["ragged_row_bytes"])
    return root, StoredV3(blobs, layout["pack_offset"], pack_row, checksums, ragged,
                          root["width"], tables)


def layout_from_record(fd, header, what):
    """The Layout of a version 3 file from its layout record, which the judge found bound to
    the file's verified metadata."""
    root, stored = read_stored(fd, header, what)
    layout = Layout()
    layout.format_version = 3
    layout.epoch, layout.job = root["epoch"], root["job"]
    layout.node_names, layout.config_json = root["node_names"], root["config_json"]
    assemble_v3(layout, stored)
    return layout


def check_matches(fd, header, layout, stored, what):
    """CorruptCheckpoint unless the file's layout record, when it has one, says what its HDF5
    metadata says (`layout` and `stored` as read with h5py), as epochrun compares them
    (check_record_matches: the whole description and layout)."""
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
        and (recorded.width, recorded.tables) == (stored.width, stored.tables)
        and np.array_equal(recorded.checksums, stored.checksums)
        and recorded.ragged == stored.ragged
    )
    if not same:
        raise CorruptCheckpoint("its layout record does not match its HDF5 metadata")
