"""Load an epochrun checkpoint into a dict of numpy arrays (docs/FORMAT.md).

    from load_checkpoint import load
    state = load("checkpoints/epoch-000004.h5")   # {"trainer_0/weights": array(...), ...}

`bytes` blobs come back as uint8 arrays (`state["trainer_0/optimizer_state"].tobytes()`).
A version 3 file's replicated blobs come back once, as "replicated/<blob>", and its global
arrays whole, in their global shape, as "arrays/<array>".
Reads format versions 1, 2 and 3 with h5py and numpy alone; it does not verify the checksums
(`epochrun inspect DIR --verify` does).
"""
import sys

import h5py
import numpy as np

NUMPY = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "u8": "u1", "bytes": "u1"}


def _read_v1(f, node):
    blobs = {}
    for name in f[f"nodes/{node}"].attrs["blob_names"]:
        ds = f[f"nodes/{node}/{name}"]
        if ds.dtype.kind == "V":  # the opaque `bytes` of version 1: read its raw bytes
            data = np.empty(ds.shape, dtype=np.uint8)
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=ds.id.get_type())
            blobs[name] = data
        else:
            blobs[name] = ds[()]
    return blobs


def _read_v2(f, node):
    blobs = {}
    index = f[f"index/{node}"]
    pack = index["packed"][()] if "packed" in index else None
    for row in index["blobs"][()]:
        name = row["name"].decode()
        if row["packed"]:
            data = pack[row["offset"]:row["offset"] + row["size"]]
            shape = tuple(row["shape"][:row["ndim"]])
            blobs[name] = data.view(NUMPY[row["dtype"].decode()]).reshape(shape)
        else:
            blobs[name] = f[f"nodes/{node}/{name}"][()]
    return blobs


def _view(data, row, shape_row):
    """Raw bytes as the blob's dtype, in the shape `shape_row` (an index row) gives."""
    shape = tuple(shape_row["shape"][:shape_row["ndim"]])
    return data.view(NUMPY[row["dtype"].decode()]).reshape(shape)


def _read_v3(f):
    """Version 3: one dataset per blob name (docs/FORMAT.md); a node's value is its row."""
    nodes = [str(node) for node in f.attrs["node_names"]]
    index = f["index/blobs"][()]
    ragged_rows = f["index/ragged"][()] if "ragged" in f["index"] else None
    pack = f["index/packed"][()] if "packed" in f["index"] else None
    state, ragged = {}, 0
    for row in index:
        name, kind = row["name"].decode(), int(row["kind"])
        if kind == 1:
            state[f"replicated/{name}"] = f[f"replicated/{name}"][()]
        elif kind == 2:
            state[f"arrays/{name}"] = f[f"arrays/{name}"][()]
        elif kind == 3:  # ragged: every node's bytes back to back, placed by /index/ragged
            data = f[f"nodes/{name}"][()].view(np.uint8)
            for rank, node in enumerate(nodes):
                entry = ragged_rows[ragged * len(nodes) + rank]
                part = data[entry["offset"]:entry["offset"] + entry["size"]]
                state[f"{node}/{name}"] = _view(part, row, entry)
            ragged += 1
        elif row["packed"]:
            for rank, node in enumerate(nodes):
                part = pack[rank, row["offset"]:row["offset"] + row["size"]]
                state[f"{node}/{name}"] = _view(part, row, row)
        else:
            values = f[f"nodes/{name}"][()]
            for rank, node in enumerate(nodes):
                state[f"{node}/{name}"] = values[rank]
    return state


def load(path):
    with h5py.File(path, "r") as f:
        version = int(f.attrs["format_version"])
        if version not in (1, 2, 3):
            raise ValueError(f"{path}: format version {version} is newer than this script reads")
        if version == 3:
            return _read_v3(f)
        read = _read_v1 if version == 1 else _read_v2
        return {f"{node}/{name}": value
                for node in f.attrs["node_names"]
                for name, value in read(f, node).items()}


if __name__ == "__main__":
    for key, value in load(sys.argv[1]).items():
        print(key, value.dtype, value.shape)
