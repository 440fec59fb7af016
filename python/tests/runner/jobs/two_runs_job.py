"""Runs in one process, their arguments given as lists: first two jobs at once, each on one part
of an mpi4py split of MPI_COMM_WORLD (ranks 0 and 1, and rank 2), then one job on the whole
world. Writes what each run returned to record-<rank>.json."""
import json
import os

import numpy as np
from mpi4py import MPI

import epochrun


def counting_job(name):
    job = epochrun.Job(name)
    job.replicated("total", np.float64, (1,))
    job.add_epoch_limiter(3)

    @job.epoch
    def add(ctx):
        ctx["total"] += ctx.comm.allreduce(1.0, "sum")  # the ranks of this job's communicator

    return job


world = MPI.COMM_WORLD
color = 0 if world.Get_rank() < 2 else 1
part = world.Split(color, world.Get_rank())
record = {}
for name, comm in ((f"part{color}", part), ("whole", world)):
    result = epochrun.run(counting_job(name), ["--checkpoint-dir", name, "--log-level", "warn"],
                          comm=comm)
    record[name] = {"exit_code": result.exit_code, "total": float(result.blobs["total"][0]),
                    "num_ranks": result.summary["num_ranks"]}
with open(f"record-{os.environ['OMPI_COMM_WORLD_RANK']}.json", "w") as out:
    json.dump(record, out)
