"""Python jobs survive what C++ jobs survive: a numpy SGD job on 3 ranks killed with kill -9 of
one rank at a random instant and resumed with --resume-from-epoch latest ends bit-identical to
an uninterrupted run, and a job whose state is a global array (bands of rows of its own block
rule, halos by sendrecv) resumed on 2 ranks from a 3-rank checkpoint ends bit-identical to the
3-rank run that never stopped."""

import random
import time

import pytest

from conftest import JOBS, finish, kill_rank_while_running, latest, rank_pids, run_ok, start

SGD = JOBS / "sgd_job.py"
HEAT = JOBS / "heat_job.py"
SGD_SLOW = ["--py_sgd.pause", "0.15", "--log-level", "warn"]


def sgd_state(directory):
    checkpoint = latest(directory)
    state = {name: checkpoint.replicated(name).tobytes()
             for name in ("weights", "momentum", "steps", "loss", "epochs_remaining")}
    state["epochs_seen"] = [checkpoint.blob("epochs_seen", node=rank).tobytes() for rank in range(3)]
    return checkpoint.epoch, state


def test_kill_9_of_one_rank_at_a_random_instant_then_resume_is_bit_identical(tmp_path):
    started = time.monotonic()
    run_ok(3, SGD, ["--checkpoint-dir", "whole", *SGD_SLOW], tmp_path)
    whole_seconds = time.monotonic() - started
    expected = sgd_state(tmp_path / "whole")
    assert expected[0] == 12
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    for attempt in range(4):
        directory = f"killed-{attempt}"
        launcher = start(3, SGD, ["--checkpoint-dir", directory, *SGD_SLOW], tmp_path)
        pids = rank_pids(launcher, 3)
        victim = chance.randrange(3)
        delay = chance.uniform(0.2, 0.8) * whole_seconds / (attempt + 1)
        time.sleep(delay)
        kill_rank_while_running(launcher, pids[victim])
        code, output = finish(launcher)
        if code != 0:
            break  # killed mid-run (a kill after the run's end is tried again, sooner)
    else:
        pytest.fail(f"no kill landed inside a run (seed {seed})")
    assert code != 0, output
    done = run_ok(3, SGD, ["--checkpoint-dir", directory, "--resume-from-epoch", "latest",
                           "--summary-json", "summary.json", *SGD_SLOW], tmp_path)
    assert sgd_state(tmp_path / directory) == expected, (
        f"seed {seed}: rank {victim} killed after {delay:.2f} s\n{done.stderr}")


HEAT_OPTIONS = ["--log-level", "warn"]


def field(directory):
    checkpoint = latest(directory)
    return checkpoint.epoch, checkpoint.array("field").tobytes(), \
        checkpoint.replicated("sweeps_done").tobytes()


def test_a_resume_on_another_rank_count_reshards_the_global_array(tmp_path):
    run_ok(3, HEAT, ["--checkpoint-dir", "whole", *HEAT_OPTIONS], tmp_path)
    expected = field(tmp_path / "whole")
    assert expected[0] == 6
    run_ok(3, HEAT, ["--checkpoint-dir", "changed", "--num-epochs", "3", *HEAT_OPTIONS], tmp_path)
    import json
    run_ok(2, HEAT, ["--checkpoint-dir", "changed", "--resume-from-epoch", "latest",
                     "--summary-json", "summary.json", *HEAT_OPTIONS], tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["resumed_from"], summary["resumed_from_ranks"], summary["num_ranks"]) == (3, 3, 2)
    assert field(tmp_path / "changed") == expected
    # The field did change, and its hot edge spread inwards.
    import numpy as np
    values = np.frombuffer(expected[1]).reshape(40, 24)
    assert values[0].tolist() == [1.0] * 24 and 0 < values[1, 12] < 1
