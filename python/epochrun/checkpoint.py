"""One checkpoint file, opened as every epochrun reader opens one (the judge: the integrity header
and the metadata hash before h5py parses the file, then every dataset's layout, from the layout
record or with h5py); every value read afterwards is verified against the xxh64 its save
recorded, unless verify=False."""

import json
import os

import numpy as np
import xxhash

from . import file_io
from .array_read import read_global_array, verify_global_array
from .errors import CheckpointError, CorruptCheckpoint
from .file_io import check_checksum, hash_range, open_checkpoint_file, read_array
from .judge import judge
from .layout import NUMPY_DTYPES


def _with_context(error, context):
    """The error again, its message after "checkpoint FILE: " as epochrun's reader says it."""
    renamed = type(error)(f"{context}: {error}")
    for name in ("file", "blob", "node"):
        if hasattr(error, name):
            setattr(renamed, name, getattr(error, name))
    if isinstance(renamed, CorruptCheckpoint) and renamed.file is None:
        renamed.file = context[len("checkpoint ") :]
    return renamed


class Checkpoint:
    """A committed checkpoint (or any checkpoint file): its job, ranks, epoch and recorded
    configuration, and its values by name."""

    def __init__(self, path, verify=True, expected_epoch=None):
        self.path = os.fspath(path)
        self.verify = verify
        self._context = f"checkpoint {self.path}"
        self._fd = None  # until it is open: __del__ closes what is open
        self._scratch = None  # the verifications' buffer, made at the first
        self._fd = open_checkpoint_file(self.path)
        try:
            header, self._layout = judge(self._fd, self.path, self._context)
            self.file_bytes = header.file_size
        except CheckpointError as error:
            self.close()
            raise _with_context(error, self._context) from None
        except BaseException:
            self.close()
            raise
        if expected_epoch is not None and self._layout.epoch != expected_epoch:
            self.close()
            raise CorruptCheckpoint(
                f"checkpoint {self.path} records epoch {self._layout.epoch}", file=self.path
            )

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        return f"<epochrun.Checkpoint epoch {self.epoch} of job {self.job} on {self.ranks} ranks: {self.path}>"

    # What the file records.
    @property
    def epoch(self):
        return self._layout.epoch

    @property
    def job(self):
        return self._layout.job

    @property
    def ranks(self):
        return len(self._layout.node_names)

    @property
    def node_names(self):
        """The node of each rank, index = rank."""
        return list(self._layout.node_names)

    @property
    def format_version(self):
        return self._layout.format_version

    @property
    def config(self):
        """The run's effective configuration as it was recorded (a dict)."""
        return json.loads(self._layout.config_json)

    @property
    def config_json(self):
        return self._layout.config_json

    @property
    def blob_bytes(self):
        """The bytes of every value: each node's per-node blobs, the replicated blobs, the
        global arrays."""
        layout = self._layout
        return (sum(v.nbytes for values in layout.node_values.values() for v in values)
                + sum(v.nbytes for v in layout.replicated) + sum(a.nbytes for a in layout.arrays))

    def per_node_count(self):
        """How many per-node values the file holds: per-node blobs times nodes."""
        return sum(len(values) for values in self._layout.node_values.values())

    @property
    def per_node_names(self):
        """The per-node blobs' names, in index order (of the first node)."""
        values = self._layout.node_values.get(self._layout.node_names[0], [])
        return [value.name for value in values]

    @property
    def replicated_names(self):
        return [value.name for value in self._layout.replicated]

    @property
    def array_names(self):
        return [array.name for array in self._layout.arrays]

    def array_info(self, name):
        """A global array's dtype ("f64"...), global shape, HDF5 path and writer blocks."""
        array = self._array(name)
        return {
            "name": array.name,
            "dtype": array.dtype,
            "shape": array.shape,
            "path": array.path,
            "blocks": [{"start": s, "count": c} for s, c in array.blocks],
        }

    # The values.
    def array(self, name, index=None):
        """Global array `name` whole, or the part a numpy index names (`ckpt.array("field",
        np.s_[10:20, ::2])`), each writer block it meets verified."""
        return self._reading(
            lambda: read_global_array(self._fd, self._array(name), index, self.verify,
                                      self._context, self.path)
        )

    def blob(self, name, node):
        """Node `node`'s value of per-node blob `name`; `node` is a node name or a rank."""
        node = self._node(node)
        for value in self._layout.node_values[node]:
            if value.name == name:
                return self._read(value)
        raise CheckpointError(f"{self._context}: node '{node}' has no blob '{name}'")

    def blobs(self, node):
        """Every per-node blob of `node` (a node name or a rank), by name."""
        node = self._node(node)
        return {value.name: self._read(value) for value in self._layout.node_values[node]}

    def replicated(self, name):
        for value in self._layout.replicated:
            if value.name == name:
                return self._read(value)
        raise CheckpointError(
            f"{self._context}: it has no replicated blob '{name}'" + self._version_note()
        )

    def verify_all(self):
        """Reads every value back, verifying each, as `epochrun inspect --verify` does: a list
        of (blob, CorruptCheckpoint) for every one that does not verify, empty when none."""
        return self.verification()["problems"]

    def verification(self):
        """verify_all's findings with what was checked: {"checked": values read, "bytes_read":
        their bytes, "problems": [(blob, error)]}, going on past a damaged value so that one
        pass names every damaged one. The values' bytes are read through one small buffer and
        kept nowhere, and a global array's dataset is read once for all of its writer blocks."""
        checks = [
            (f"{node}/{value.name}", value.nbytes, lambda value=value: self._verify(value))
            for node in self._layout.node_names
            for value in self._layout.node_values[node]
        ]
        checks += [
            (f"replicated/{value.name}", value.nbytes, lambda value=value: self._verify(value))
            for value in self._layout.replicated
        ]
        checks += [
            (f"arrays/{array.name}", array.nbytes, lambda array=array: self._verify_array(array))
            for array in self._layout.arrays
        ]
        problems = []
        read = 0
        for name, nbytes, check in checks:
            try:
                check()
                read += nbytes
            except CheckpointError as error:
                problems.append((name, error))
        return {"checked": len(checks), "bytes_read": read, "problems": problems}

    def _scratch_buffer(self):
        if self._scratch is None or len(self._scratch) != file_io.VERIFY_PIECE:
            self._scratch = bytearray(file_io.VERIFY_PIECE)
        return self._scratch

    def _verify_array(self, array):
        self._reading(lambda: verify_global_array(self._fd, array, self._scratch_buffer(),
                                                  self._context, self.path))

    def _verify(self, value):
        """Verifies a per-node or replicated value as _read does, in its words, keeping none of
        its bytes."""
        what = f"{self._context}: {value.what}"

        def verify():
            state = xxhash.xxh64()
            hash_range(self._fd, value.offset, value.nbytes, self._scratch_buffer(), state, what)
            check_checksum(state.intdigest(), value.xxh64, what, file=self.path, blob=value.name,
                           node=value.node)

        self._reading(verify)

    def _reading(self, read):
        if self._fd is None:
            raise CheckpointError(f"{self._context} is closed")
        return read()

    def _read(self, value, verify=None):
        verify = self.verify if verify is None else verify
        what = f"{self._context}: {value.what}"

        def read():
            data, digests = read_array(self._fd, value.offset, NUMPY_DTYPES[value.dtype],
                                       value.shape, what, [(0, value.nbytes)] if verify else [])
            if verify:
                check_checksum(digests[0], value.xxh64, what, file=self.path, blob=value.name,
                               node=value.node)
            return data

        return self._reading(read)

    def _array(self, name):
        for array in self._layout.arrays:
            if array.name == name:
                return array
        raise CheckpointError(f"{self._context}: it has no global array '{name}'" + self._version_note())

    def _node(self, node):
        names = self._layout.node_names
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if not 0 <= node < len(names):
                raise CheckpointError(f"{self._context}: it has no rank {node} ({len(names)} ranks)")
            return names[node]
        if node not in self._layout.node_values:
            raise CheckpointError(f"{self._context}: it has no node '{node}'")
        return node

    def _version_note(self):
        version = self._layout.format_version
        return "" if version >= 3 else f" (format version {version} has none)"
