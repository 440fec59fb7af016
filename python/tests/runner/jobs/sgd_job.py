"""Data-parallel linear regression by mini-batch SGD with momentum, in numpy: each rank holds
its strided shard of a synthetic problem, the ranks sum each mini-batch's gradient with
allreduce, and the weights, the momentum and the step count are replicated blobs. Each epoch
sleeps `pause` seconds besides, so that a kill from outside can fall anywhere in a run."""
import time

import numpy as np

import epochrun

job = epochrun.Job("py_sgd", "numpy SGD with momentum, data-parallel")
job.option("features", 16, "features of the problem", run_defining=True)
job.option("samples", 1200, "samples of the problem", run_defining=True)
job.option("seed", 7, "seed of the problem", run_defining=True)
job.option("epochs", 12, "epochs to run")
job.option("batch_size", 60, "samples per mini-batch, over all ranks")
job.option("learning_rate", 0.05, "step size")
job.option("pause", 0.0, "seconds each epoch sleeps besides")
job.replicated("weights", np.float64, lambda o: (o.features,))
job.replicated("momentum", np.float64, lambda o: (o.features,))
job.replicated_scalar("steps", np.int64)
job.replicated_scalar("loss", np.float64, np.inf)  # no loss before the first epoch
job.scalar("epochs_seen", np.int64, output=True)  # per node: how many epochs this rank ran
job.add_epoch_limiter("epochs")
job.add_stop_condition("converged", lambda blobs: blobs["loss"] < 1e-12)


def shard(ctx):
    o = ctx.options
    rng = np.random.default_rng(o.seed)
    x = rng.standard_normal((o.samples, o.features))
    y = x @ rng.standard_normal(o.features) + 0.01 * rng.standard_normal(o.samples)
    return x[ctx.rank::ctx.size], y[ctx.rank::ctx.size]


@job.epoch
def train(ctx):
    o = ctx.options
    x, y = shard(ctx)
    w, v = ctx["weights"], ctx["momentum"]
    batches = len(x) // (o.batch_size // ctx.size)
    local = o.batch_size // ctx.size
    total = 0.0
    for b in range(batches):
        xb, yb = x[b * local:(b + 1) * local], y[b * local:(b + 1) * local]
        residual = xb @ w - yb
        gradient = xb.T @ residual
        ctx.comm.allreduce(gradient, "sum")
        v *= 0.9
        v += gradient / o.batch_size
        w -= o.learning_rate * v  # in place: the blob's own memory
        total += ctx.comm.allreduce(float(residual @ residual), "sum")
    ctx["steps"] += batches
    ctx["loss"] = total / (batches * o.batch_size)
    ctx["epochs_seen"] += 1
    time.sleep(o.pause)


if __name__ == "__main__":
    raise SystemExit(epochrun.run(job).exit_code)
