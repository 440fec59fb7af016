"""`python -m epochrun inspect DIR` prints what `epochrun inspect DIR` prints, with and without
--verify, for every run of the session and for a version 1 file; the records of runs.jsonl and
metrics.jsonl are the package's too."""

import subprocess
import sys

import pytest

import epochrun
from conftest import ROOT, epochrun_cli

V1 = ROOT / "tests" / "data" / "v1_sgd_regression_3_ranks_epoch_4.h5"


def python_inspect(*arguments):
    return subprocess.run([sys.executable, "-m", "epochrun", "inspect", *map(str, arguments)],
                          cwd=ROOT / "python", capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", ["heat", "heat4", "sgd", "sum", "v1"])
@pytest.mark.parametrize("verify", [[], ["--verify"]], ids=["listing", "verify"])
def test_the_listing_is_epochruns(runs, name, verify):
    path = V1 if name == "v1" else runs[name]
    cpp = epochrun_cli("inspect", path, *verify)
    python = python_inspect(path, *verify)
    assert (python.returncode, python.stdout) == (0, cpp.stdout)


def test_runs_and_metrics_are_records(runs):
    directory = epochrun.open(runs["heat"])
    assert [(r["ranks"], r["resumed_from"], r["last_committed_epoch"]) for r in directory.runs] == [
        (3, None, 3), (2, 3, 5)]
    epochs = [m for m in directory.metrics if m["event"] == "epoch"]
    assert [m["epoch"] for m in epochs] == [0, 1, 2, 3, 4, 5]
    assert [len(m["ranks"]) for m in epochs] == [3, 3, 3, 3, 2, 2]


def test_runs_and_metrics_are_data_frames_with_pandas(runs):
    pytest.importorskip("pandas", reason="pandas is not installed (python3-pandas)")
    directory = epochrun.open(runs["heat"])
    assert list(directory.runs_frame()["ranks"]) == [3, 2]
    frame = directory.metrics_frame()
    epochs = frame[frame["event"] == "epoch"]
    assert len(epochs) == 3 * 4 + 2 * 2 and set(epochs["rank"]) == {0, 1, 2}
