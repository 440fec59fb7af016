"""The h5py + mpi4py peer of an epochrun load, for scripts/peer_load.sh.

    mpirun -np R python3 scripts/h5py_peer_load.py [--verify] FILE

Every rank opens FILE, a checkpoint written on R ranks (format version 3, or 2), with h5py's
mpio driver and reads what a resume at R ranks gives it, into fresh numpy arrays, the way a
user of h5py would. Version 3: its row of each per-node blob (`f["nodes/x"][rank]`, packed
blobs as views of its row of /index/packed, ragged ones through /index/ragged), every
replicated blob, and its own block of each global array (a hyperslab read under
`with ds.collective:`). Version 2: its node's datasets, packed blobs as views of its node's
pack. With --verify it also computes each value's xxh64 (python3-xxhash) and compares it with
the file's checksum table, as epochrun always does (docs/FORMAT.md). The time runs from a barrier
before the open to a barrier after the close; rank 0 prints one JSON line with the slowest
rank's seconds (what a job waits for) and every rank's.

Exit codes: 0 read (and verified), 1 a checksum did not match, 2 a module is missing or h5py
has no MPI support.
"""
import json
import sys

try:
    import h5py
    import numpy as np
    import xxhash
    from mpi4py import MPI
except ImportError as error:
    print(f"h5py_peer_load.py: {error}: install python3-h5py-mpi python3-mpi4py python3-xxhash "
          "python3-numpy", file=sys.stderr)
    sys.exit(2)

NUMPY = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "u8": "u1", "bytes": "u1"}


def shape_of(row, fields):
    # The index of fixed-size columns pads the shape to the node's most dimensions and says how
    # many count in `ndim`; the draft with variable-length shapes has no `ndim`.
    shape = row["shape"]
    return tuple(int(n) for n in (shape[:row["ndim"]] if "ndim" in fields else shape))


def read_node(f, node):
    """{name: fresh numpy array} of one node's blobs, in index order."""
    index = f[f"index/{node}/blobs"][()]
    pack = f[f"index/{node}/packed"][()] if f"index/{node}/packed" in f else None
    blobs = {}
    for row in index:
        name = row["name"].decode()
        if row["packed"]:
            data = pack[row["offset"]:row["offset"] + row["size"]]
            blobs[name] = data.view(NUMPY[row["dtype"].decode()]).reshape(
                shape_of(row, index.dtype.names))
        else:
            blobs[name] = np.asarray(f[f"nodes/{node}/{name}"][()])
    return blobs


def mismatches(f, node, blobs):
    """Names of the blobs whose xxh64 differs from the node's checksum table."""
    expected = f[f"index/{node}/xxh64"][()]
    return [name for (name, data), want in zip(blobs.items(), expected)
            if xxhash.xxh64_intdigest(np.ascontiguousarray(data)) != int(want)]


def read_rank_v3(f, rank):
    """({name: fresh numpy array}, [its checksum's index in /index/xxh64]) of what rank `rank`
    loads from a version 3 file at the rank count it was written at."""
    index = f["index/blobs"][()]
    ranks = int(f.attrs["num_ranks"])
    names = [n.decode() for n in index["name"]]
    per_node = [i for i, row in enumerate(index) if row["kind"] in (0, 3)]
    replicated = [i for i, row in enumerate(index) if row["kind"] == 1]
    pack = f["index/packed"][rank] if "index/packed" in f else None
    ragged = [i for i, row in enumerate(index) if row["kind"] == 3]
    blobs, sums = {}, []
    for k, i in enumerate(per_node):
        row, name = index[i], names[i]
        dtype = NUMPY[row["dtype"].decode()]
        if row["kind"] == 3:
            entry = f["index/ragged"][ragged.index(i) * ranks + rank]
            ds = f[f"nodes/{name}"]
            first = int(entry["offset"]) // ds.dtype.itemsize
            value = ds[first:first + int(entry["size"]) // ds.dtype.itemsize].reshape(
                tuple(entry["shape"][:entry["ndim"]]))
        elif row["packed"]:
            value = pack[row["offset"]:row["offset"] + row["size"]].view(dtype).reshape(
                tuple(row["shape"][:row["ndim"]]))
        else:
            value = np.asarray(f[f"nodes/{name}"][rank])
        blobs[name] = value
        sums.append(rank * len(per_node) + k)
    base = ranks * len(per_node)
    for k, i in enumerate(replicated):
        blobs["replicated/" + names[i]] = np.asarray(f[f"replicated/{names[i]}"][()])
        sums.append(base + k)
    at = base + len(replicated)
    for i, row in enumerate(index):
        if row["kind"] != 2:
            continue
        ds = f[f"arrays/{names[i]}"]
        start = ds.attrs["epochrun_block_starts"][rank]
        count = ds.attrs["epochrun_block_counts"][rank]
        with ds.collective:
            blobs["arrays/" + names[i]] = ds[tuple(slice(int(a), int(a) + int(n))
                                                   for a, n in zip(start, count))]
        sums.append(at + rank)
        at += len(ds.attrs["epochrun_block_starts"])
    return blobs, sums


def main():
    args = sys.argv[1:]
    verify = "--verify" in args
    paths = [a for a in args if a != "--verify"]
    if len(paths) != 1:
        print("usage: mpirun -np R python3 h5py_peer_load.py [--verify] FILE", file=sys.stderr)
        return 2
    if not h5py.get_config().mpi:
        print("h5py_peer_load.py: this h5py has no MPI support (driver mpio): install "
              "python3-h5py-mpi and run under mpirun", file=sys.stderr)
        return 2
    comm = MPI.COMM_WORLD
    comm.Barrier()
    started = MPI.Wtime()
    with h5py.File(paths[0], "r", driver="mpio", comm=comm) as f:
        version = int(f.attrs["format_version"])
        if version == 3:
            blobs, sums = read_rank_v3(f, comm.rank)
            bad = []
            if verify:
                table = f["index/xxh64"][()]
                bad = [name for (name, data), at in zip(blobs.items(), sums)
                       if xxhash.xxh64_intdigest(np.ascontiguousarray(data)) != int(table[at])]
        elif version == 2:
            node = f.attrs["node_names"][comm.rank]
            blobs = read_node(f, node)
            bad = mismatches(f, node, blobs) if verify else []
        else:
            raise SystemExit(f"{paths[0]}: format version {version}, this peer reads 2 and 3")
    comm.Barrier()
    seconds = MPI.Wtime() - started
    nbytes = sum(b.nbytes for b in blobs.values())
    everyone = comm.gather((seconds, nbytes, bad), root=0)
    if comm.rank != 0:
        return 0
    failed = [f"rank {r}: {name}" for r, (_, _, names) in enumerate(everyone) for name in names]
    if failed:
        print(f"h5py_peer_load.py: xxh64 mismatch: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(json.dumps({"seconds": max(s for s, _, _ in everyone), "verify": verify,
                      "bytes": sum(n for _, n, _ in everyone),
                      "rank_seconds": [s for s, _, _ in everyone]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
