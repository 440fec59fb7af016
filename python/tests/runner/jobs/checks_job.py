"""A job that looks at the runner from the inside, one aspect per --py_checks.mode, and writes
what it saw to record-<rank>.json in the working directory for the test to judge:

  errors       wrong dtype, shape, name and non-contiguous arrays, each caught as
               epochrun.UsageError (its message and class)
  memory       every task's view of every blob: the array's address against the workspace's, and
               whether it shares memory with the view the task before saw
  collectives  allreduce (sum, max, min; arrays and numbers), broadcast, allgather, gather,
               sendrecv, barrier, rank and size, and the same communicator through mpi4py
  gil          how often a Python thread ran while the runner saved (between two tasks) and while
               this rank waited in a collective for a slow rank: the GIL released
  raise        a task raising ValueError on rank --py_checks.rank at epoch 2 (with
               --py_checks.blocked true the other ranks wait for it in an allreduce meanwhile;
               --py_checks.usage true raises epochrun.UsageError instead)
"""
import json
import os
import sys
import threading
import time

import numpy as np

import epochrun

job = epochrun.Job("py_checks", "the runner seen from a Python job")
job.option("mode", "memory", "what to look at")
job.option("rank", 1, "the rank that raises (mode raise)")
job.option("blocked", False, "mode raise: the other ranks wait in an allreduce meanwhile")
job.option("usage", False, "mode raise: raise epochrun.UsageError")
job.option("epochs", 4, "epochs to run")
job.option("state_mib", 1, "MiB of the big blob per rank")
job.option("mpi4py", False, "run on an mpi4py communicator (epochrun.run(job, comm=...))")
job.blob("weights", np.float64, (4,))
job.blob("big", np.uint8, lambda o: (o.state_mib << 20,))
job.scalar("counter", np.int64, 5)
job.replicated("shared", np.float32, (2, 3))
job.global_array("field", np.float64, (6, 5))
job.bytes("opaque", 16)
job.add_epoch_limiter("epochs")

record = {"events": []}
kept = {}  # name -> the array the task before saw
ticks = [0]
marks = {}


def note(**fields):
    record["events"].append(fields)


def errors(ctx):
    attempts = {
        "dtype": lambda: ctx.__setitem__("weights", np.zeros(4, np.float32)),
        "shape": lambda: ctx.__setitem__("weights", np.zeros(5)),
        "noncontiguous": lambda: ctx.__setitem__("weights", np.zeros(8)[::2]),
        "python_value": lambda: ctx.__setitem__("counter", 2.5),
        "missing": lambda: ctx["no_such_blob"],
        "allreduce_noncontiguous": lambda: ctx.comm.allreduce(np.zeros(8)[::2]),
        "allreduce_dtype": lambda: ctx.comm.allreduce(np.zeros(3, np.float16)),
        "allreduce_op": lambda: ctx.comm.allreduce(np.zeros(3), "product"),
        "gathered_outside_download": lambda: ctx.gathered("weights"),
        "not_a_global_array": lambda: ctx.block("weights"),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
        except epochrun.UsageError as error:
            note(case=name, cls=type(error).__name__, message=str(error),
                 is_value_error=isinstance(error, ValueError))
        else:
            note(case=name, cls=None, message="")
    # What works: the right dtype and shape, a Python value of a compatible kind.
    ctx["weights"] = np.arange(4.0)
    ctx["counter"] = 3
    note(case="accepted", weights=ctx["weights"].tolist(), counter=int(ctx["counter"]))


def memory(ctx, task):
    for name in ("weights", "big", "counter", "shared", "field", "opaque"):
        array = ctx[name]
        before = kept.get(name)
        note(task=task, epoch=ctx.epoch, blob=name, address=array.ctypes.data,
             workspace=ctx._address(name), shape=list(array.shape), dtype=str(array.dtype),
             writeable=bool(array.flags.writeable),
             shares_with_before=None if before is None else bool(np.shares_memory(before, array)))
        kept[name] = array
    ctx["weights"] += 1.0  # in place, seen by the next task and saved
    ctx["counter"] += 1


def collectives(ctx):
    comm, rank, size = ctx.comm, ctx.rank, ctx.size
    out = {"rank": rank, "size": size, "ctx_rank": ctx.rank, "ctx_size": ctx.size}
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8):
        values = np.array([rank + 1, 10 - rank, 2], dtype=dtype)
        for op in ("sum", "max", "min"):
            array = values.copy()
            returned = comm.allreduce(array, op)
            out[f"allreduce_{op}_{np.dtype(dtype).name}"] = array.tolist()
            out[f"allreduce_in_place_{op}_{np.dtype(dtype).name}"] = returned is array
    out["allreduce_int"] = int(comm.allreduce(rank + 1, "sum"))
    out["allreduce_float_max"] = float(comm.allreduce(rank * 0.5, "max"))
    out["allreduce_list"] = comm.allreduce([rank, 1], "min").tolist()
    root_values = np.full(3, 7.0 if rank == 0 else -1.0)
    comm.broadcast(root_values, 0)
    out["broadcast"] = root_values.tolist()
    out["allgather"] = [part.tolist() for part in comm.allgather(np.arange(rank + 1, dtype=np.int64))]
    out["gather"] = [part.tolist() for part in comm.gather(np.array([rank * 2.0]), 0)]
    received = np.full(2, -1.0)
    right = (rank + 1) % size
    left = (rank - 1) % size
    comm.sendrecv(np.array([rank, rank * 10.0]), right, received, left)
    out["sendrecv"] = received.tolist()
    comm.barrier()
    mpi = comm.mpi4py
    out["mpi4py_rank"] = mpi.Get_rank()
    out["mpi4py_size"] = mpi.Get_size()
    out["mpi4py_allreduce"] = mpi.allreduce(rank + 1)
    buffer = np.array([float(rank)])
    mpi.Allreduce(np.array([float(rank)]), buffer)
    out["mpi4py_Allreduce"] = buffer.tolist()
    record["collectives"] = out


def ticking():
    while not marks.get("stop"):
        ticks[0] += 1
        time.sleep(0.0005)


def gil(ctx, task):
    if task == "first":
        if "thread" not in marks:
            marks["thread"] = threading.Thread(target=ticking, daemon=True)
            marks["thread"].start()
        if "after_task" in marks:
            # From the end of the last task of the epoch before to here: its checkpoint.
            note(window="save", epoch=ctx.epoch, ticks=ticks[0] - marks["after_task"])
        # Rank 0 comes late to the allreduce: the others wait in it, the GIL released.
        if ctx.rank == 0:
            time.sleep(0.3)
        before = ticks[0]
        ctx.comm.allreduce(np.zeros(1), "sum")
        if ctx.rank != 0:
            note(window="collective", epoch=ctx.epoch, ticks=ticks[0] - before)
    else:
        ctx["big"][::4096] += 1  # something to save
        marks["after_task"] = ticks[0]


def raising(ctx):
    o = ctx.options
    if ctx.epoch == 2 and ctx.rank == o.rank:
        if o.usage:
            raise epochrun.UsageError(f"a usage error raised by rank {ctx.rank}")
        raise ValueError(f"boom on rank {ctx.rank}")
    if ctx.epoch == 2 and o.blocked:
        ctx.comm.allreduce(np.zeros(1), "sum")  # the raising rank never comes


@job.init
def start(ctx):
    if ctx.options.mode == "memory":
        memory(ctx, "init")


@job.epoch
def first(ctx):
    mode = ctx.options.mode
    if mode == "errors" and ctx.epoch == 1:
        errors(ctx)
    elif mode == "memory":
        memory(ctx, "first")
    elif mode == "collectives" and ctx.epoch == 1:
        collectives(ctx)
    elif mode == "gil":
        gil(ctx, "first")
    elif mode == "raise":
        raising(ctx)


@job.epoch
def second(ctx):
    mode = ctx.options.mode
    if mode == "memory":
        memory(ctx, "second")
    elif mode == "gil":
        gil(ctx, "second")


if __name__ == "__main__":
    comm = None
    if "--py_checks.mpi4py" in sys.argv:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    result = epochrun.run(job, comm=comm)
    marks["stop"] = True
    if result.summary is not None:
        final = result.blobs
        record["after_run"] = {
            name: {"address": final[name].ctypes.data,
                   "shares_with_last_task": None if name not in kept
                   else bool(np.shares_memory(kept[name], final[name]))}
            for name in final}
        record["summary"] = result.summary
    record["exit_code"] = result.exit_code
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    with open(f"record-{rank}.json", "w") as out:
        json.dump(record, out)
    raise SystemExit(result.exit_code)
