"""What a job written in Python pays for its checkpoints against the same job in C++: the
program's heat_diffusion and a Python job declaring the same blobs (the field, a global array of
f64 split over the same 2-D process grid, and the replicated scalars sweeps, max_change and
epochs_remaining), saved and loaded by the same runner, in one session, alternated.

    PYTHONPATH=build/python python3 scripts/python_job_cost.py [--build build] [--dir DIR]
        [--rounds 5] [--ranks 3] [--mib-per-rank 256] [--epochs 3]

Each round runs, in the order A B then B A the next round: A the C++ job, B the Python job, each
with a synchronous checkpoint after init and every epoch (EPOCHS + 1 saves) into a new
directory, then a run resuming the latest checkpoint of each (one load). From metrics.jsonl: a
save's time is the slowest rank's save_seconds, a load's its load_seconds. It prints per round
the median save of each job, their ratio (Python / C++) and the load ratio, then the medians over
the rounds. Never time while anything else runs on the machine.

Run with EPOCHRUN_COST_JOB=1 under mpirun, this file is the Python job itself."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np


def python_job():
    import epochrun

    job = epochrun.Job("py_heat_state", "heat_diffusion's blobs, touched once an epoch")
    job.option("rows", 512, "rows of the whole grid", run_defining=True)
    job.option("columns", 1024, "cells per row", run_defining=True)
    job.option("max_epochs", 1000, "stop after this many epochs")
    job.global_array("field", np.float64, lambda o: (o.rows, o.columns),
                     lambda shape, rank, ranks: epochrun.grid_block(
                         shape, epochrun.process_grid(ranks, 2), rank))
    job.replicated_scalar("sweeps", np.int64)
    job.replicated_scalar("max_change", np.float64, float("inf"))
    job.add_epoch_limiter("max_epochs")

    @job.init
    def init_field(ctx):
        ctx["field"][...] = ctx.rank  # every page written, as heat_diffusion's init writes them

    @job.epoch
    def sweep(ctx):
        ctx["field"] += 1.0  # one pass over the field, as one sweep of heat_diffusion
        ctx["sweeps"] += 1

    raise SystemExit(epochrun.run(job).exit_code)


def slowest(metrics, event, key):
    figures = []
    for line in metrics.read_text().splitlines():
        entry = json.loads(line)
        if entry["event"] == event:
            figures.append(max(rank[key] for rank in entry["ranks"] if key in rank))
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--dir", default="/tmp/epochrun-python-job-cost")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--mib-per-rank", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    build = Path(args.build).resolve()
    program = build / "epochrun"
    if not program.exists():
        sys.exit(f"python_job_cost.py: no {program}: build it first")
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", HDF5_USE_FILE_LOCKING="FALSE",
               PYTHONPATH=str(build / "python"), PYTHONDONTWRITEBYTECODE="1")
    rows = args.mib_per_rank * 128 * args.ranks  # rows of 1024 f64 cells (8 KiB)
    common = ["--num-epochs", str(args.epochs), "--log-level", "warn", "--keep-last", "2"]
    # The resume's run loads the newest checkpoint (epoch EPOCHS) and has no epoch left to run.
    jobs = {
        "cpp": [str(program), "run", "--job", "heat_diffusion", "--heat_diffusion.rows",
                str(rows), "--heat_diffusion.sweeps_per_epoch", "1",
                "--heat_diffusion.max_epochs", "1000", "--heat_diffusion.tolerance", "0",
                "--heat_diffusion.output_file", ""],
        "python": ["/usr/bin/python3", str(Path(__file__).resolve()), "--py_heat_state.rows",
                   str(rows)],
    }

    def run(kind, directory, extra):
        command = ["mpirun", "-np", str(args.ranks), *jobs[kind], "--checkpoint-dir",
                   str(directory), *common, *extra]
        done = subprocess.run(command, env=dict(env, EPOCHRUN_COST_JOB="1"), cwd=work,
                              capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            sys.exit(f"{kind} run failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def measure(kind):
        directory = work / f"ck-{kind}"
        shutil.rmtree(directory, ignore_errors=True)
        subprocess.run(["sync"], check=True)
        run(kind, directory, [])
        saves = slowest(directory / "metrics.jsonl", "epoch", "save_seconds")
        saves += slowest(directory / "metrics.jsonl", "save", "save_seconds")
        run(kind, directory, ["--resume-from-epoch", "latest"])
        loads = slowest(directory / "metrics.jsonl", "load", "load_seconds")
        shutil.rmtree(directory, ignore_errors=True)
        return statistics.median(saves), loads[-1], len(saves)

    rounds = []
    for round_number in range(args.rounds):
        order = ["cpp", "python"] if round_number % 2 == 0 else ["python", "cpp"]
        figures = {kind: measure(kind) for kind in order}
        save_ratio = figures["python"][0] / figures["cpp"][0]
        load_ratio = figures["python"][1] / figures["cpp"][1]
        rounds.append((save_ratio, load_ratio))
        print(f"round {round_number + 1} ({' '.join(order)}): save C++ {figures['cpp'][0]:.4f} s, "
              f"Python {figures['python'][0]:.4f} s ({figures['cpp'][2]}/{figures['python'][2]} "
              f"saves), ratio {save_ratio:.3f}; load C++ {figures['cpp'][1]:.4f} s, Python "
              f"{figures['python'][1]:.4f} s, ratio {load_ratio:.3f}", flush=True)
    save_median = statistics.median(r[0] for r in rounds)
    load_median = statistics.median(r[1] for r in rounds)
    print(f"median over {args.rounds} rounds: save Python / C++ {save_median:.3f}, "
          f"load Python / C++ {load_median:.3f} (target 1.05)")


if __name__ == "__main__":
    if os.environ.get("EPOCHRUN_COST_JOB") == "1" and os.environ.get("OMPI_COMM_WORLD_RANK"):
        python_job()
    else:
        main()
