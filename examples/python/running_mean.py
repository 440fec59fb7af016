# A complete job: each epoch every rank draws numbers from its own sequence; their sum and
# count over all ranks accumulate in a checkpointed blob; it stops after `epochs` epochs.
import numpy as np

import epochrun

job = epochrun.Job("running_mean", "the mean of numbers drawn on every rank")
job.option("epochs", 5, "epochs to run")
job.option("samples", 1000, "numbers each rank draws per epoch")
job.blob("totals", np.float64, (2,), output=True)  # sum, count
job.scalar("draws", np.int64)                      # the generator's position
job.add_epoch_limiter("epochs")


@job.epoch
def draw_and_reduce(ctx):
    n = ctx.options.samples
    i = ctx["draws"].astype(np.uint64) + np.arange(1, n + 1, dtype=np.uint64)
    x = i * np.uint64(0x9E3779B97F4A7C15) + np.uint64(ctx.rank)
    epoch_totals = np.array([((x >> np.uint64(11)) * 2.0**-53).sum(), n])  # uniform in [0, 1)
    ctx["draws"] += n
    ctx.comm.allreduce(epoch_totals, "sum")
    ctx["totals"] += epoch_totals


@job.exit
def report(ctx):
    if ctx.has_gathered():  # rank 0
        total, count = ctx.gathered("totals")["trainer_0"]
        print(f"mean of {count:.0f} numbers: {total / count:.6f}")


if __name__ == "__main__":
    raise SystemExit(epochrun.run(job).exit_code)
