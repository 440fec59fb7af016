"""Data-parallel training of a small PyTorch model (a two-layer MLP on a synthetic regression
problem) under epochrun: each rank computes the gradients of its share of every mini-batch, the
ranks sum them through the epochrun communicator, and every rank takes the same Adam step.

The model's and the optimizer's state_dict tensors *are* the job's blobs: each parameter, and
each tensor of Adam's state, is a torch view of a replicated blob's numpy array
(torch.from_numpy shares the memory), so training updates the workspace in place, a checkpoint
saves those bytes as they are, and a resume loads them back where the tensors look. A run
killed at any instant and resumed with --resume-from-epoch latest ends with parameters
bit-identical to a run never interrupted (one thread, deterministic algorithms).

    mpirun -np 3 python3 examples/python/torch_ddp.py --checkpoint-dir ck --resume-from-epoch latest
"""
import numpy as np
import torch

import epochrun

FEATURES, HIDDEN = 8, 32

# Bit-identical runs: one thread (a reduction's order then never depends on the scheduler) and
# deterministic kernels.
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

job = epochrun.Job("torch_ddp", "a two-layer MLP trained data-parallel with Adam")
job.option("epochs", 20, "epochs to run")
job.option("batches", 8, "mini-batches per epoch")
job.option("batch_size", 96, "samples per mini-batch, over all ranks")
job.option("learning_rate", 0.01, "Adam's step size")
job.option("samples", 3000, "samples of the synthetic problem", run_defining=True)
job.option("seed", 2026, "seed of the data and of the initial model", run_defining=True)
job.add_epoch_limiter("epochs")

model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                            torch.nn.Linear(HIDDEN, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
parameters = dict(model.named_parameters())
# One replicated blob per tensor of both state_dicts, named after its key.
for name, parameter in parameters.items():
    job.replicated(f"model.{name}", np.float32, tuple(parameter.shape))
for index, parameter in enumerate(parameters.values()):
    job.replicated_scalar(f"optimizer.state.{index}.step", np.float32)
    job.replicated(f"optimizer.state.{index}.exp_avg", np.float32, tuple(parameter.shape))
    job.replicated(f"optimizer.state.{index}.exp_avg_sq", np.float32, tuple(parameter.shape))
job.replicated_scalar("loss", np.float64)


def data(options):
    """The problem: the same on every rank and every run, a function of the seed alone."""
    rng = np.random.default_rng(options.seed)
    x = rng.standard_normal((options.samples, FEATURES)).astype(np.float32)
    y = np.sin(x @ rng.standard_normal(FEATURES)).astype(np.float32)[:, None]
    return torch.from_numpy(x), torch.from_numpy(y)


def bind(ctx):
    """Makes every tensor of the model's and Adam's state a view of its blob (once per process:
    the blobs' memory stays where it is for the whole run)."""
    for index, (name, parameter) in enumerate(parameters.items()):
        blob = ctx[f"model.{name}"]
        if parameter.data.data_ptr() != blob.ctypes.data:
            parameter.data = torch.from_numpy(blob)
            optimizer.state[parameter] = {
                key: torch.from_numpy(ctx[f"optimizer.state.{index}.{key}"])
                for key in ("step", "exp_avg", "exp_avg_sq")}


@job.init
def initial_model(ctx):
    torch.manual_seed(ctx.options.seed)  # the same initial model on every rank
    for layer in (model[0], model[2]):
        layer.reset_parameters()
    for name, parameter in parameters.items():
        ctx[f"model.{name}"] = parameter.detach().numpy()  # copied into the blob once


@job.epoch
def train(ctx):
    bind(ctx)
    options = ctx.options
    for group in optimizer.param_groups:
        group["lr"] = options.learning_rate
    x, y = data(options)
    # Each epoch's mini-batches, from the seed and the epoch: nothing to checkpoint for them.
    order = np.random.default_rng([options.seed, ctx.epoch]).permutation(options.samples)
    total = 0.0
    for b in range(options.batches):
        batch = order[b * options.batch_size:(b + 1) * options.batch_size]
        mine = torch.from_numpy(batch[ctx.rank::ctx.size])  # this rank's share
        optimizer.zero_grad(set_to_none=False)
        # Scaled so that the sum over the ranks is the gradient of the whole batch's mean loss.
        loss = torch.nn.functional.mse_loss(model(x[mine]), y[mine], reduction="sum") / len(batch)
        loss.backward()
        for parameter in parameters.values():
            ctx.comm.allreduce(parameter.grad.numpy(), "sum")  # in place, on the tensor's memory
        optimizer.step()
        total += ctx.comm.allreduce(float(loss), "sum")
    ctx["loss"] = total / options.batches


@job.exit
def report(ctx):
    if ctx.rank == 0:
        print(f"torch_ddp: mean squared error {float(ctx['loss']):.6f} after epoch {ctx.epoch}")


if __name__ == "__main__":
    raise SystemExit(epochrun.run(job).exit_code)
