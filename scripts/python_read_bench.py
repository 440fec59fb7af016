#!/usr/bin/python3
"""Reading and verifying one large global array in Python (python/epochrun) against
`epochrun inspect --verify` of the same file and against plain h5py reading it without
verification, in alternated rounds (A B C C B A ...), each measure in a fresh process.
Prints every run, the median of each, and the two ratios the package is held to:
Python verified / inspect --verify (at most 1.5) and Python verified / h5py (at most 1.3).

    scripts/python_read_bench.py [--program build/epochrun] [--dir /tmp/epochrun-python-read]
                                 [--rows 8192] [--columns 12288] [--rounds 5] [--cold]

The file is heat_diffusion's field of ROWS x COLUMNS float64 (the default is 768 MiB), written
once on 3 ranks (its epoch 0) unless DIR holds it already. Warm by default: each measure reads
from the page cache, after one untimed read; --cold drops the page cache before every run
(needs root), so that each reads from the disk. A measure's time is its own read (the Python
ones timed inside their process, the open included; inspect's the process's wall time, which
adds its start of a few ms).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PYTHON_READ = """
import sys, time
sys.path.insert(0, {package!r})
start = time.perf_counter()
import epochrun
with epochrun.Checkpoint({file!r}) as checkpoint:
    field = checkpoint.array("field")
print(time.perf_counter() - start, field.nbytes)
"""

H5PY_READ = """
import time
start = time.perf_counter()
import h5py
with h5py.File({file!r}, "r") as f:
    field = f["arrays/field"][...]
print(time.perf_counter() - start, field.nbytes)
"""


def write_checkpoint(options):
    environment = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:
        environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(
        ["mpirun", "--oversubscribe", "-np", "3", options.program, "run", "--job",
         "heat_diffusion", "--checkpoint-dir", str(options.dir / "ck"), "--num-epochs", "1",
         "--heat_diffusion.rows", str(options.rows), "--heat_diffusion.columns",
         str(options.columns), "--heat_diffusion.sweeps_per_epoch", "1", "--log-level", "warn"],
        check=True, env=environment, timeout=1800)


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def timed_python(script, file):
    done = subprocess.run([sys.executable, "-c", script.format(package=str(ROOT / "python"),
                                                               file=str(file))],
                          check=True, capture_output=True, text=True, timeout=600)
    return float(done.stdout.split()[0])


def timed_inspect(program, file):
    start = time.perf_counter()
    subprocess.run([program, "inspect", str(file), "--verify"], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default=str(ROOT / "build" / "epochrun"))
    parser.add_argument("--dir", type=Path, default=Path("/tmp/epochrun-python-read"))
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--columns", type=int, default=12288)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", action="store_true")
    options = parser.parse_args()
    file = options.dir / "ck" / "epoch-000000.h5"
    if not file.exists():
        write_checkpoint(options)
    measures = {
        "python verified": lambda: timed_python(PYTHON_READ, file),
        "inspect --verify": lambda: timed_inspect(options.program, file),
        "h5py unverified": lambda: timed_python(H5PY_READ, file),
    }
    if not options.cold:
        measures["h5py unverified"]()  # the page cache filled once, untimed
    times = {name: [] for name in measures}
    order = list(measures)
    for round_ in range(options.rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            if options.cold:
                drop_caches()
            seconds = measures[name]()
            times[name].append(seconds)
            print(f"round {round_ + 1}  {name:17s} {seconds:.3f} s", flush=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    size = file.stat().st_size / 2**20
    print(f"\n{file} ({size:.0f} MiB), {'cold' if options.cold else 'warm'} page cache, "
          f"{options.rounds} rounds, medians:")
    for name, median in medians.items():
        print(f"  {name:17s} {median:.3f} s")
    print(f"python verified / inspect --verify: {medians['python verified'] / medians['inspect --verify']:.2f} (target <= 1.5)")
    print(f"python verified / h5py unverified:  {medians['python verified'] / medians['h5py unverified']:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
