"""epochrun.CheckpointManager from a loop of one's own (jobs/manager_loop.py) on real ranks: the
saves commit what the reader reads back, asynchronously too; a kill -9 of one rank and a restore
of the latest ends bit-identical to the loop that never stopped, and so does a restore on another
rank count (the global array resharded); the node-local level's unflushed epochs are restored
from the node-local copies; arrays held across a restore see the restored values; mistakes are
one line."""

import json
import random
import time

import numpy as np
import pytest

from conftest import JOBS, finish, kill_rank_while_running, latest, launch, rank_pids, run_ok, start

LOOP = JOBS / "manager_loop.py"


def events(directory):
    """The events of the last run of the loop in `directory` (its start left out)."""
    seen = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    starts = [index for index, event in enumerate(seen) if event["event"] == "start"]
    return seen[starts[-1] + 1:]


def state(directory):
    checkpoint = latest(directory)
    return checkpoint.epoch, checkpoint.array("u").tobytes(), checkpoint.replicated("w").tobytes()


def expected_values(epochs):
    """The loop's arrays after `epochs` steps, computed here from the same formula."""
    rows, columns = np.arange(12)[:, None], np.arange(8)[None, :]
    u, w = np.zeros((12, 8)), np.zeros(4)
    for epoch in range(1, epochs + 1):
        u *= 0.5
        u += np.sin(rows * 8 + columns + epoch)
        w[...] = w * 0.9 + epoch
    return u, w


def test_async_saves_from_the_loop_commit_what_the_reader_reads(tmp_path):
    run_ok(3, LOOP, ["--dir", "ck", "--epochs", "6", "--async", "--keep-last", "2"], tmp_path)
    seen = events(tmp_path)
    saved = [event for event in seen if event["event"] == "saved"]
    assert [event["epoch"] for event in saved] == list(range(1, 7))
    # Every save but the last returned while its write went on; the last is written at once.
    assert all(event["in_background"] and not event["committed"] for event in saved[:-1])
    assert saved[-1]["committed"] and not saved[-1]["in_background"]
    assert not any(event["failure"] for event in saved)
    import epochrun
    directory = epochrun.open(tmp_path / "ck")
    assert directory.epochs == [5, 6]  # keep_last=2
    u, w = expected_values(6)
    checkpoint = directory.latest()
    assert checkpoint.array("u").tobytes() == u.tobytes()
    assert checkpoint.replicated("w").tobytes() == w.tobytes()
    assert [checkpoint.blob("steps_here", node=rank).item() for rank in range(3)] == [6] * 3
    metrics = [json.loads(line) for line in (tmp_path / "ck" / "metrics.jsonl").read_text()
               .splitlines()]
    assert sorted(line["epoch"] for line in metrics if line["event"] == "save") == \
        list(range(1, 7))


def test_kill_9_of_one_rank_then_restore_latest_is_bit_identical(tmp_path):
    run_ok(3, LOOP, ["--dir", "whole", "--epochs", "10"], tmp_path)
    expected = state(tmp_path / "whole")
    assert expected[0] == 10
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    for attempt in range(4):
        directory = f"killed-{attempt}"
        launcher = start(3, LOOP, ["--dir", directory, "--epochs", "10", "--async",
                                   "--pause", "0.2"], tmp_path)
        pids = rank_pids(launcher, 3)
        # Inside the loop: once its first commit is there, at a random instant of the ~2 s left.
        deadline = time.monotonic() + 60
        while not (tmp_path / directory / "index.json").exists() and launcher.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(chance.uniform(0.0, 1.6) / (attempt + 1))
        kill_rank_while_running(launcher, pids[chance.randrange(3)])
        code, output = finish(launcher)
        if code != 0:
            break
    else:
        pytest.fail(f"no kill landed inside a loop (seed {seed})")
    done = run_ok(3, LOOP, ["--dir", directory, "--epochs", "10", "--async"], tmp_path)
    first = events(tmp_path)[0]
    assert first["event"] == "restored" and 1 <= first["epoch"] <= 10, done.stdout
    assert state(tmp_path / directory) == expected, f"seed {seed}\n{done.stdout}{done.stderr}"


def test_a_restore_on_another_rank_count_reshards_the_global_array(tmp_path):
    run_ok(3, LOOP, ["--dir", "ck", "--epochs", "4"], tmp_path)
    done = run_ok(2, LOOP, ["--dir", "ck", "--epochs", "7"], tmp_path)
    restored = events(tmp_path)[0]
    assert (restored["event"], restored.get("epoch"), restored.get("written_by_ranks")) == \
        ("restored", 4, 3), done.stdout + done.stderr
    u, w = expected_values(7)
    assert state(tmp_path / "ck") == (7, u.tobytes(), w.tobytes())


def test_the_node_local_level_restores_an_unflushed_epoch_from_its_copies(tmp_path):
    local = tmp_path / "local"
    done = run_ok(3, LOOP, ["--dir", "ck", "--epochs", "5", "--local-dir", local,
                            "--flush-every", "10"], tmp_path)
    saved = [event for event in events(tmp_path) if event["event"] == "saved"]
    # Epoch 1 is flushed (the first), 2 to 4 are node-local only, the last is flushed.
    assert [event["node_local"] for event in saved] == [False, True, True, True, False]
    # A loop that ends after epoch 3 without a last save leaves 2 and 3 node-local only: the
    # next restores 3 from the node-local copies.
    run_ok(3, LOOP, ["--dir", "ck2", "--epochs", "3", "--local-dir", local / "2",
                     "--flush-every", "10", "--no-last"], tmp_path)
    done = run_ok(3, LOOP, ["--dir", "ck2", "--epochs", "6", "--local-dir", local / "2",
                            "--flush-every", "10"], tmp_path)
    restored = events(tmp_path)[0]
    assert (restored["event"], restored["epoch"], restored["node_local"]) == \
        ("restored", 3, True), done.stdout
    u, w = expected_values(6)
    assert state(tmp_path / "ck2") == (6, u.tobytes(), w.tobytes())


def test_arrays_held_across_a_restore_see_the_restored_values(tmp_path):
    run_ok(3, LOOP, ["--dir", "ck", "--epochs", "3"], tmp_path)
    done = run_ok(3, LOOP, ["--dir", "ck", "--epochs", "5", "--hold"], tmp_path)
    held = [event for event in events(tmp_path) if event["event"] == "held"]
    assert held == [{"event": "held", "same_memory": True, "equal": True}], done.stdout
    u, w = expected_values(5)
    assert state(tmp_path / "ck") == (5, u.tobytes(), w.tobytes())


@pytest.mark.parametrize("mistake, words", [
    ("dtype", "blob 'w' holds float64 of shape (4,); the value assigned is float32"),
    ("shape", "blob 'u' holds float64 of shape (4, 8); the value assigned is float64 of shape "
              "(3, 3)"),
    ("name", "blob 'not there' is not in the checkpoint manager's arrays"),
    ("epoch", "save takes an epoch number of at least 0, not -1"),
    ("closed", "the checkpoint manager is closed"),
])
def test_a_mistake_is_one_clear_error_and_nothing_committed_is_touched(tmp_path, mistake, words):
    run_ok(3, LOOP, ["--dir", "ck", "--epochs", "2"], tmp_path)
    before = state(tmp_path / "ck")
    done = launch(3, LOOP, ["--dir", "ck", "--epochs", "4", "--bad", mistake], tmp_path)
    assert done.returncode != 0
    assert f"epochrun.errors.UsageError: {words}" in done.stderr, done.stderr
    assert state(tmp_path / "ck") == before


def test_an_exception_on_one_rank_ends_every_rank_instead_of_a_hang(tmp_path):
    # The other ranks are in the next save's agreements, which the failed rank never joins: its
    # uncaught exception ends them all (MPI_Abort) long before the save's timeout (600 s).
    started = time.monotonic()
    done = launch(3, LOOP, ["--dir", "ck", "--epochs", "6", "--async", "--bad",
                            "one-rank-raises"], tmp_path, timeout=60)
    assert done.returncode != 0
    assert "RuntimeError: rank 1 fails in the loop" in done.stderr, done.stderr
    assert time.monotonic() - started < 60
    # What was committed stays committed and verifies.
    epoch, u, w = state(tmp_path / "ck")
    expected_u, expected_w = expected_values(epoch)
    assert 1 <= epoch <= 3 and (u, w) == (expected_u.tobytes(), expected_w.tobytes())


def test_bad_options_are_refused_before_anything_is_written(tmp_path):
    script = tmp_path / "bad_options.py"
    script.write_text(
        "import os, numpy as np, epochrun\n"
        "job = epochrun.Job('bad')\n"
        "job.replicated('w', np.float64, (2,))\n"
        "try:\n"
        "    epochrun.CheckpointManager(job, 'ck', flush_every=3)\n"
        "except epochrun.UsageError as error:\n"
        "    rank = os.environ['OMPI_COMM_WORLD_RANK']\n"
        "    open(f'refused-{rank}', 'w').write(str(error))\n")
    run_ok(3, script, [], tmp_path)
    for rank in range(3):
        assert (tmp_path / f"refused-{rank}").read_text() == (
            "flush_every, flush_interval, local_keep and local_redundancy need a node-local "
            "directory (local_dir)")
    assert not (tmp_path / "ck").exists()
