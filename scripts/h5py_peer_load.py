"""The h5py + mpi4py peer of an epochrun load, for scripts/peer_load.sh.

    mpirun -np R python3 scripts/h5py_peer_load.py [--verify] FILE

Every rank opens FILE, a version 2 checkpoint written on R ranks, with h5py's mpio driver and
reads its own node's blobs (rank r: node_names[r]) into fresh numpy arrays, the way a user of
h5py would: each dataset with `ds[()]`, packed blobs as views of their node's pack read once.
With --verify it also computes each blob's xxh64 (python3-xxhash) and compares it with
/index/<node>/xxh64, as epochrun always does (docs/FORMAT.md). The time runs from a barrier
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
        if version != 2:
            raise SystemExit(f"{paths[0]}: format version {version}, this peer reads version 2")
        node = f.attrs["node_names"][comm.rank]
        blobs = read_node(f, node)
        bad = mismatches(f, node, blobs) if verify else []
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
