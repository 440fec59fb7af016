"""PyTorch for real (examples/python/torch_ddp.py): a two-layer MLP trained data-parallel on 3
ranks, gradients summed in place on the tensors' memory through the epochrun communicator, its
model's and Adam's state_dict tensors numpy views of replicated blobs. A kill -9 of one rank at
a random instant, then --resume-from-epoch latest, ends with every parameter and every tensor of
the optimizer's state bit-identical to an uninterrupted run's."""

import random
import subprocess
import sys
import time

import pytest

from conftest import (
    ROOT, environment, finish, kill_rank_while_running, latest, rank_pids, run_ok, start)

EXAMPLE = ROOT / "examples" / "python" / "torch_ddp.py"
OPTIONS = ["--check-replicated", "--log-level", "warn"]


@pytest.fixture(scope="module", autouse=True)
def torch_installed():
    found = subprocess.run([sys.executable, "-c", "import torch"], env=environment(),
                           capture_output=True, timeout=120)
    if found.returncode != 0:
        pytest.skip("PyTorch is not installed (Debian: python3-torch)")


def state(directory):
    """The newest checkpoint's epoch, every state_dict tensor's bytes, and the loss."""
    checkpoint = latest(directory)
    values = {name: checkpoint.replicated(name).tobytes() for name in checkpoint.replicated_names
              if name.startswith(("model.", "optimizer."))}
    return checkpoint.epoch, values, float(checkpoint.replicated("loss"))


def test_torch_ddp_killed_and_resumed_is_bit_identical(tmp_path):
    run_ok(3, EXAMPLE, ["--checkpoint-dir", "whole", *OPTIONS], tmp_path)
    epoch, expected, loss = state(tmp_path / "whole")
    assert epoch == 20 and len(expected) == 4 + 3 * 4
    import epochrun
    checkpoints = epochrun.open(tmp_path / "whole")
    assert loss < float(checkpoints.epoch(1).replicated("loss"))  # it did learn
    assert expected["model.0.weight"] != checkpoints.epoch(0).replicated("model.0.weight").tobytes()

    seed = random.randrange(2**32)
    chance = random.Random(seed)
    for attempt in range(4):
        directory = f"killed-{attempt}"
        launcher = start(3, EXAMPLE, ["--checkpoint-dir", directory, *OPTIONS], tmp_path)
        pids = rank_pids(launcher, 3)
        # After torch's import (most of a run's time here), before the run's end.
        while not (tmp_path / directory / "epoch-000001.h5").exists() and launcher.poll() is None:
            time.sleep(0.02)
        victim = chance.randrange(3)
        delay = chance.uniform(0.0, 1.5) / (attempt + 1)
        time.sleep(delay)
        kill_rank_while_running(launcher, pids[victim])
        code, output = finish(launcher)
        if code != 0:
            break
    else:
        pytest.fail(f"no kill landed inside a run (seed {seed})")
    run_ok(3, EXAMPLE, ["--checkpoint-dir", directory, "--resume-from-epoch", "latest", *OPTIONS],
           tmp_path)
    resumed = state(tmp_path / directory)
    assert resumed[0] == 20
    assert resumed[1] == expected, f"seed {seed}: rank {victim} killed {delay:.2f} s after epoch 1"
    assert resumed[2] == loss
