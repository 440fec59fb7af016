#!/usr/bin/python3
"""The Python reader's verified reads of one checkpoint file against the floor of that work --
the file read whole in reads of 1 MiB into one buffer and hashed with xxh64 -- from the disk
(the file's pages dropped before every measure, posix_fadvise DONTNEED) and from the page cache,
in alternated rounds (A B C D, D C B A, ...), each measure in a fresh process and timed inside
it (the interpreter's start and imports not counted, the open and the judge counted).

    scripts/python_verify_floor.py FILE [--array field] [--rounds 5] [--package DIR ...]

Measures: `Checkpoint(FILE).array(ARRAY)` (verified, into the array it returns), `Checkpoint(
FILE).verify_all()` (every value, keeping none), the floor, and the floor into fresh memory (the
file read into fresh memory of its size -- an anonymous private mapping, in 4 KiB pages, as the
package's arrays are -- in reads of 8 MiB and hashed: what any reader that returns the values
pays at least). Prints every run, the medians and each measure's ratio to the
floor of the same medium (the median of the per-round ratios). With --package given more than
once (this tree's package and another's, say), the package's measures are taken of each, in the
same rounds, labelled [0], [1], ... A benchmark: no test runs it.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROLOGUE = """
import mmap, os, sys, time
sys.path.insert(0, {package!r})
import numpy as np
import xxhash
import epochrun
file = {file!r}
if {cold!r}:
    fd = os.open(file, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
start = time.perf_counter()
"""

MEASURES = {
    "array": """
with epochrun.Checkpoint(file) as checkpoint:
    value = checkpoint.array({array!r})
""",
    "verify_all": """
with epochrun.Checkpoint(file) as checkpoint:
    assert checkpoint.verify_all() == []
""",
    "floor": """
fd = os.open(file, os.O_RDONLY)
buffer = memoryview(bytearray(1 << 20))
state = xxhash.xxh64()
at = 0
while True:
    got = os.preadv(fd, [buffer], at)
    if got == 0:
        break
    state.update(buffer[:got])
    at += got
os.close(fd)
""",
    "fresh_floor": """
fd = os.open(file, os.O_RDONLY)
size = os.fstat(fd).st_size
value = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
view = memoryview(value)
state = xxhash.xxh64()
for at in range(0, size, 8 << 20):
    piece = view[at : min(size, at + (8 << 20))]
    os.preadv(fd, [piece], at)
    state.update(piece)
os.close(fd)
""",
}

EPILOGUE = """
print(time.perf_counter() - start)
"""


# The measures that read with the package (the others do not import it to read).
PACKAGE_MEASURES = ("array", "verify_all")


def run(measure, options, cold):
    name, _, package = measure.partition("[")
    package = options.package[int(package[:-1])] if package else options.package[0]
    script = PROLOGUE.format(package=str(package), file=str(options.file), cold=cold)
    script += MEASURES[name].format(array=options.array) + EPILOGUE
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True, timeout=600)
    return float(done.stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("file", type=Path)
    parser.add_argument("--array", default="field")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--package", type=Path, action="append",
                        help="a directory that holds the epochrun package (default: this tree's)")
    options = parser.parse_args()
    options.package = options.package or [ROOT / "python"]
    print(f"{options.file}: {options.file.stat().st_size} bytes; load: {os.getloadavg()}")
    names = [m if len(options.package) == 1 or m not in PACKAGE_MEASURES else f"{m}[{i}]"
             for m in MEASURES for i in (range(len(options.package)) if m in PACKAGE_MEASURES
                                         else [0])]
    seconds = {(m, cold): [] for m in names for cold in (True, False)}
    for round_ in range(options.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for cold in (True, False):
            if not cold:
                run("floor", options, False)  # the file into the page cache, untimed
            for measure in order:
                seconds[(measure, cold)].append(run(measure, options, cold))
        print(f"round {round_}: " + ", ".join(
            f"{m} {'cold' if c else 'warm'} {s[-1]:.3f}" for (m, c), s in seconds.items()))
    for cold in (True, False):
        medium = "cold" if cold else "warm"
        floor = seconds[("floor", cold)]
        for measure in names:
            mine = seconds[(measure, cold)]
            ratios = [a / b for a, b in zip(mine, floor)]
            print(f"{medium} {measure:14s} median {statistics.median(mine):.3f} s "
                  f"(min {min(mine):.3f}, max {max(mine):.3f}), ratio to the floor "
                  f"{statistics.median(ratios):.3f}")
    print(f"load after: {os.getloadavg()}")
    for i, package in enumerate(options.package):
        print(f"[{i}] {package}")


if __name__ == "__main__":
    main()
