"""Jacobi sweeps of a plate whose top edge is held at 1: the field is a global array split in
bands of whole rows (a block rule of its own), each rank exchanging its edge rows with its
neighbours by sendrecv every sweep. Every cell is computed from the same neighbours in the same
order whatever the split, so a run resumed on another rank count ends bit-identical to one that
never changed."""
import numpy as np

import epochrun

job = epochrun.Job("py_heat", "Jacobi sweeps of a global array split in bands of rows")
job.option("rows", 40, "rows of the plate", run_defining=True)
job.option("columns", 24, "columns of the plate", run_defining=True)
job.option("sweeps", 5, "sweeps per epoch")
job.option("epochs", 6, "epochs to run")
job.global_array("field", np.float64, lambda o: (o.rows, o.columns),
                 lambda shape, rank, ranks: epochrun.grid_block(shape, (ranks, 1), rank))
job.replicated_scalar("sweeps_done", np.int64)
job.add_epoch_limiter("epochs")


@job.init
def hot_top_edge(ctx):
    if ctx.block("field").start[0] == 0:
        ctx["field"][0, :] = 1.0


def with_halo(ctx, band):
    """The band with the row above and below it (zeros at the plate's edges)."""
    comm, rank, size = ctx.comm, ctx.rank, ctx.size
    up = rank - 1 if rank > 0 else comm.NO_RANK
    down = rank + 1 if rank < size - 1 else comm.NO_RANK
    padded = np.zeros((band.shape[0] + 2, band.shape[1]))
    padded[1:-1] = band
    above, below = np.zeros(band.shape[1]), np.zeros(band.shape[1])
    comm.sendrecv(np.ascontiguousarray(band[-1]), down, above, up)
    comm.sendrecv(np.ascontiguousarray(band[0]), up, below, down)
    padded[0], padded[-1] = above, below
    return padded


@job.epoch
def sweep(ctx):
    block = ctx.block("field")
    rows = ctx.options.rows
    band = ctx["field"]
    first = block.start[0]
    for _ in range(ctx.options.sweeps):
        padded = with_halo(ctx, band)
        new = 0.25 * (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:])
        global_rows = np.arange(first, first + band.shape[0])
        interior = (global_rows > 0) & (global_rows < rows - 1)
        band[interior, 1:-1] = new[interior]
    ctx["sweeps_done"] += ctx.options.sweeps


if __name__ == "__main__":
    raise SystemExit(epochrun.run(job).exit_code)
