"""The h5py + mpi4py peer of `epochrun bench --global-arrays`, for docs/benchmarks.md.

    mpirun -np R python3 scripts/h5py_collective_bench.py [--mib-per-rank M] [--rounds N]
                                                          [--dir DIR] [--cold]
    (scripts/h5py_collective_bench.sh installs what it needs and runs it)

The same global array as the bench: float64, 2-D, each rank's block of M MiB (default 256) in
rows of at most 4096 elements, split over the process grid MPI_Dims_create gives R ranks (3
ranks: [3, 1]), the first n % p ranks of a dimension one element more. Every round (default 5)
times, on all ranks at once and barrier to barrier (the slowest rank counts):

  h5py_write   h5py.File(driver="mpio") created by every rank, one dataset of the global shape
               with h5py's defaults (contiguous, allocated at creation as parallel HDF5 does, no
               fill value set, so never filled: as epochrun's), each rank's block written under
               `with dset.collective:`, the file closed, then MPI_File_sync (HDF5 closes
               without one; the bench's saves sync)
  write_limit  the same bytes with os.pwrite, each rank's block as one piece at its offset in one
               plain file (rank 0 creates it), then os.fsync: what the bench's limit does
  h5py_read    the file opened with driver="mpio", each rank's block read under
               `with dset.collective:` into a new numpy array
  read_limit   os.preadv of each rank's bytes into a new numpy array (numpy.zeros, as h5py
               allocates its own)

in alternated order (write then limit, then limit then write; the same for the reads), and
checks what it read against what it wrote (untimed). Rank 0 prints one JSON line per measure:
median, min and max seconds, MB/s (10^6 bytes of all ranks over the median), every round's
seconds and, for the h5py measures, the median over rounds of its time over its limit's in the
same round (the ratio `epochrun bench` reports for its own measures). --cold drops the page
cache before every read (root only).

Exit codes: 0 measured, 1 a read differed from what was written, 2 a module is missing, h5py
has no MPI support, or a bad argument.
"""
import argparse
import json
import os
import statistics
import sys

try:
    import h5py
    import numpy as np
    from mpi4py import MPI
except ImportError as error:
    print(f"h5py_collective_bench.py: {error}: install python3-h5py-mpi python3-mpi4py "
          "(scripts/h5py_collective_bench.sh does)", file=sys.stderr)
    sys.exit(2)

BLOCK_COLUMNS = 4096  # as the bench: rows of at most 32 KiB


def plan(ranks, rank, bytes_per_rank):
    """(global shape, process grid, this rank's (start, count)) as the bench splits the array."""
    elements = max(1, bytes_per_rank // 8)
    columns = min(BLOCK_COLUMNS, elements)
    rows = elements // columns
    grid = MPI.Compute_dims(ranks, 2)
    shape = (rows * grid[0], columns * grid[1])
    coords = (rank // grid[1], rank % grid[1])  # row-major over the grid, as MPI_Cart_create
    start, count = [], []
    for n, p, c in zip(shape, grid, coords):
        base, extra = divmod(n, p)
        start.append(c * base + min(c, extra))
        count.append(base + (1 if c < extra else 0))
    return shape, grid, tuple(start), tuple(count)


def block_cells(shape, start, count):
    """The block's cells as the bench fills them: SplitMix64 of each cell's row-major index."""
    rows = np.arange(start[0], start[0] + count[0], dtype=np.uint64)[:, None]
    cols = np.arange(start[1], start[1] + count[1], dtype=np.uint64)[None, :]
    z = (rows * np.uint64(shape[1]) + cols + np.uint64(1)) * np.uint64(0x9e3779b97f4a7c15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return (z ^ (z >> np.uint64(31))).view("<f8")


def timed(comm, step):
    """Seconds of `step` on all ranks at once, barrier to barrier (the slowest rank)."""
    comm.Barrier()
    started = MPI.Wtime()
    result = step()
    comm.Barrier()
    return MPI.Wtime() - started, result


def h5py_write(comm, path, shape, start, count, cells):
    window = tuple(slice(s, s + n) for s, n in zip(start, count))
    with h5py.File(path, "w", driver="mpio", comm=comm, locking=False) as f:
        dset = f.create_dataset("arrays/field", shape=shape, dtype="<f8")
        with dset.collective:
            dset[window] = cells
    fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY)
    fh.Sync()
    fh.Close()


def h5py_read(comm, path, start, count):
    window = tuple(slice(s, s + n) for s, n in zip(start, count))
    with h5py.File(path, "r", driver="mpio", comm=comm, locking=False) as f:
        dset = f["arrays/field"]
        with dset.collective:
            return dset[window]


def plain_write(comm, path, offset, cells):
    if comm.rank == 0:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    comm.Barrier()
    fd = os.open(path, os.O_WRONLY)
    try:
        view, done = memoryview(cells.reshape(-1).view(np.uint8)), 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
        os.fsync(fd)
    finally:
        os.close(fd)


def plain_read(path, offset, nbytes):
    # Fresh memory in 4 KiB pages, as h5py's own arrays (numpy.zeros: calloc) and the bench's
    # limit get: numpy.empty would ask for huge pages (madvise) and fault 512 times less.
    buffer = np.zeros(nbytes, dtype=np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        view, done = memoryview(buffer), 0
        while done < nbytes:
            got = os.preadv(fd, [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"{path}: short read at {offset + done}")
            done += got
    finally:
        os.close(fd)
    return buffer


def drop_file(path):
    """This rank drops `path` from the page cache (POSIX_FADV_DONTNEED; no root needed), so that
    the next read of it comes from the disk, as epochrun's loads of a checkpoint do (its saves
    write with direct I/O or drop what they wrote)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_page_cache(comm):
    """Rank 0 syncs and drops the page cache; False on every rank where it may not."""
    dropped = False
    if comm.rank == 0:
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as control:
                control.write("3\n")
            dropped = True
        except OSError:
            dropped = False
    return comm.bcast(dropped, root=0)


def in_order(round_, first, second):
    """`first` then `second` in even rounds, the other way round in odd ones."""
    for step in ((first, second) if round_ % 2 == 0 else (second, first)):
        step()


def parse(argv):
    parser = argparse.ArgumentParser(prog="h5py_collective_bench.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--mib-per-rank", type=float, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="/tmp/epochrun-h5py-collective")
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.mib_per_rank <= 1 << 20 or args.rounds < 1:
        parser.error("--mib-per-rank must be in (0, 1048576] and --rounds at least 1")
    return args


def summary(name, seconds, nbytes, limit=None):
    row = {"name": name, "median_seconds": statistics.median(seconds),
           "min_seconds": min(seconds), "max_seconds": max(seconds),
           "mb_per_second": nbytes / 1e6 / statistics.median(seconds), "seconds": seconds}
    if limit is not None:
        row["limit"] = limit[0]
        row["ratio"] = statistics.median(m / l for m, l in zip(seconds, limit[1]))
    return row


def main():
    args = parse(sys.argv[1:])
    if not h5py.get_config().mpi:
        print("h5py_collective_bench.py: this h5py has no MPI support (driver mpio): install "
              "python3-h5py-mpi and run under mpirun", file=sys.stderr)
        return 2
    comm = MPI.COMM_WORLD
    shape, grid, start, count = plan(comm.size, comm.rank, int(args.mib_per_rank * (1 << 20)))
    cells = block_cells(shape, start, count)
    offsets = comm.allgather(cells.nbytes)
    offset, total = sum(offsets[:comm.rank]), sum(offsets)
    if comm.rank == 0:
        os.makedirs(args.dir, exist_ok=True)
    comm.Barrier()
    h5_path, plain_path = os.path.join(args.dir, "field.h5"), os.path.join(args.dir, "field.bin")
    times = {name: [] for name in ("h5py_write", "write_limit", "h5py_read", "read_limit")}
    cold, differs = args.cold, False

    def before_read():
        nonlocal cold
        if cold and not drop_page_cache(comm):
            cold = False
            if comm.rank == 0:
                print("h5py_collective_bench.py: --cold needs root: reads may come from memory",
                      file=sys.stderr)

    def measure(name, step):
        seconds, result = timed(comm, step)
        times[name].append(seconds)
        return result

    for round_ in range(args.rounds):
        in_order(round_,
                 lambda: measure("h5py_write",
                                 lambda: h5py_write(comm, h5_path, shape, start, count, cells)),
                 lambda: measure("write_limit",
                                 lambda: plain_write(comm, plain_path, offset, cells)))
        read = {}

        def read_h5py():
            before_read()
            drop_file(h5_path)
            drop_file(plain_path)
            read["h5py"] = measure("h5py_read", lambda: h5py_read(comm, h5_path, start, count))

        def read_plain():
            before_read()
            drop_file(h5_path)
            drop_file(plain_path)
            read["plain"] = measure("read_limit",
                                    lambda: plain_read(plain_path, offset, cells.nbytes))

        in_order(round_, read_h5py, read_plain)
        differs |= not np.array_equal(read["h5py"].view(np.uint64), cells.view(np.uint64))
        differs |= read["plain"].tobytes() != cells.tobytes()
        comm.Barrier()
        if comm.rank == 0:
            os.remove(h5_path)
            os.remove(plain_path)
    if comm.allreduce(differs, op=MPI.LOR):
        if comm.rank == 0:
            print("h5py_collective_bench.py: a read differed from what was written",
                  file=sys.stderr)
        return 1
    if comm.rank == 0:
        common = {"ranks": comm.size, "bytes_per_rank": cells.nbytes, "array_shape": list(shape),
                  "process_grid": list(grid), "rounds": args.rounds, "cold": cold,
                  "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version}
        for name, limit in (("h5py_write", "write_limit"), ("h5py_read", "read_limit"),
                            ("write_limit", None), ("read_limit", None)):
            row = summary(name, times[name], total, (limit, times[limit]) if limit else None)
            print(json.dumps({**row, **common}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
