"""What the Python layer costs per task call: a job of many tiny tasks (each does nothing, or
adds 1 to a blob through ctx["x"]) run by the real runner without checkpoints, timed from
inside the epoch group, against the same functions called in a plain Python loop.

    mpirun -np 1 python3 scripts/python_task_overhead.py [--no-checkpoints] [--overhead.tasks 2000]
        [--overhead.epochs 20]          (PYTHONPATH=build/python; any rank count)

Prints, on rank 0, the median over the epochs of the time per task call under the runner, the
time per call of the same function in a loop, and their difference: what the runner and the
bindings add to each task call (the C++ TaskGroup's loop, the GIL taken and given back, the task
context bound, the call, and for the touching tasks the array view)."""
import statistics
import sys
import time

import numpy as np

import epochrun

job = epochrun.Job("overhead", "many tiny tasks")
job.option("tasks", 2000, "tasks per epoch (each kind)")
job.option("epochs", 20, "epochs")
job.blob("x", np.float64, (1,))
job.add_epoch_limiter("epochs")
marks = {"nothing": [], "touch": []}


def nothing(ctx):
    pass


def touch(ctx):
    ctx["x"][0] += 1.0


def timing(kind, edge):
    def mark(ctx):
        marks[kind].append((edge, time.perf_counter()))
    return mark


def declare(tasks):
    for kind, function in (("nothing", nothing), ("touch", touch)):
        job.epoch_group.add(f"{kind}_start", timing(kind, "start"))
        for index in range(tasks):
            job.epoch_group.add(f"{kind}_{index}", function)
        job.epoch_group.add(f"{kind}_end", timing(kind, "end"))


def per_call(kind, tasks):
    times = marks[kind]
    epochs = [(end - start) / tasks for (_, start), (_, end) in zip(times[::2], times[1::2])]
    return statistics.median(epochs[1:] if len(epochs) > 2 else epochs)


def direct(function, tasks, context):
    best = []
    for _ in range(20):
        started = time.perf_counter()
        for _ in range(tasks):
            function(context)
        best.append((time.perf_counter() - started) / tasks)
    return statistics.median(best)


class PlainContext(dict):
    """What the loop's calls get: a dict of one array, as close to ctx as plain Python is."""


if __name__ == "__main__":
    # The task count shapes the job's declaration, so it is read before the run as well.
    tasks = 2000
    for i, argument in enumerate(sys.argv):
        if argument == "--overhead.tasks":
            tasks = int(sys.argv[i + 1])
    declare(tasks)
    result = epochrun.run(job)
    if result.exit_code == 0 and result.summary and result.summary["num_ranks"] and \
            job.options.tasks == tasks:
        plain = PlainContext(x=np.zeros(1))
        under = {kind: per_call(kind, tasks) for kind in marks}
        loop = {"nothing": direct(nothing, tasks, plain), "touch": direct(touch, tasks, plain)}
        import os
        if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
            for kind in marks:
                print(f"{kind:8s} per task call: {under[kind] * 1e6:7.3f} us under the runner, "
                      f"{loop[kind] * 1e6:7.3f} us in a plain loop, "
                      f"{(under[kind] - loop[kind]) * 1e6:7.3f} us added")
    raise SystemExit(result.exit_code)
