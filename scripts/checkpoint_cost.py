#!/usr/bin/env python3
"""What a synchronous checkpoint every epoch costs a job, from its own log lines.

    scripts/checkpoint_cost.py [--ranks N] [--dir DIR] -- EPOCHRUN-RUN-OPTIONS...

Runs `mpirun -np N epochrun run --checkpoint-dir DIR/ck EPOCHRUN-RUN-OPTIONS` (DIR default: a
new directory under the current one, removed afterwards) and reads rank 0's lines
"[time] epoch E done in X s; checkpoint ... in Y s": X is the epoch's own work (the epoch
group and the stop decision), Y the save that follows it, and W, the time from the previous
such line to this one, the epoch's whole wall time (work, save, retention, logging). Prints,
over the epochs after the first (whose W is unknown), the medians of X, Y and W and the
median of the per-epoch W / X: the wall time per epoch with a checkpoint every epoch against
the same epoch without one. (epochrun has no option yet to run without saving, so the epoch's
own work, timed in the same run, stands for a run without checkpoints.)

EPOCHRUN (default build/epochrun) and MPIRUN (default mpirun) select the programs.
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

LINE = re.compile(r"^\[([0-9-]+ [0-9:.]+)\] .*\] epoch (\d+) done in ([0-9.]+) s; "
                  r"checkpoint \S+ .* in ([0-9.]+) s", re.MULTILINE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--dir", help="where the checkpoints go (default: a new directory here)")
    parser.add_argument("run_options", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    run_options = [a for a in args.run_options if a != "--"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    epochrun = os.environ.get("EPOCHRUN", os.path.join(root, "build", "epochrun"))
    directory = args.dir or tempfile.mkdtemp(prefix="checkpoint-cost-", dir=".")
    command = [os.environ.get("MPIRUN", "mpirun"), "-np", str(args.ranks), epochrun, "run",
               "--checkpoint-dir", os.path.join(directory, "ck"), "--log-level", "info"]
    command += run_options
    print("+", " ".join(command), flush=True)
    try:
        run = subprocess.run(command, stderr=subprocess.PIPE, text=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        return run.returncode
    lines = [(datetime.datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f"), int(e), float(x), float(y))
             for t, e, x, y in LINE.findall(run.stderr)]
    if len(lines) < 3:
        sys.stderr.write("checkpoint_cost: fewer than 3 epochs in the log; run more epochs\n")
        return 1
    epochs = [(e, x, y, (t - previous[0]).total_seconds())
              for previous, (t, e, x, y) in zip(lines, lines[1:])]
    print(f"{'epoch':>5} {'work s':>8} {'save s':>8} {'wall s':>8} {'wall/work':>10}")
    for epoch, work, save, wall in epochs:
        print(f"{epoch:>5} {work:8.3f} {save:8.3f} {wall:8.3f} {wall / work:10.2f}")
    work = statistics.median(x for _, x, _, _ in epochs)
    save = statistics.median(y for _, _, y, _ in epochs)
    wall = statistics.median(w for _, _, _, w in epochs)
    ratio = statistics.median(w / x for _, x, _, w in epochs)
    print(f"medians over epochs {epochs[0][0]}..{epochs[-1][0]}: work {work:.3f} s, "
          f"save {save:.3f} s, wall {wall:.3f} s; wall per epoch with a checkpoint / without "
          f"(wall / work): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
