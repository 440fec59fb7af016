"""Python's failures are the runner's: a task raising on one rank ends every rank with the task
failure's exit code within seconds, its traceback in that rank's log and one error line from
rank 0, also when the other ranks are blocked in a collective the raising rank never makes
(--task-failure-timeout); epochrun.UsageError raised in a task exits 2 as the table says; and
the signals do what they do to a C++ job: SIGUSR1 to mpirun and SIGTERM to a rank stop the run
after the epoch in progress with its checkpoint and exit 75 (a resume then ends as an
uninterrupted run), SIGINT (Ctrl-C) ends the rank as it ends a C++ job's."""

import json
import os
import signal
import sys
import time

import pytest

from conftest import (JOBS, ROOT, finish, latest, launch, rank_pids, run_ok, start,
                      start_command)

CHECKS = JOBS / "checks_job.py"
SGD = JOBS / "sgd_job.py"
# A hang detector, not a timing: a failed run ends in a few seconds, a hung one never.
FAILURE_BOUND = 45


def test_a_task_raising_on_one_rank_fails_every_rank_with_its_traceback_in_the_log(tmp_path):
    started = time.monotonic()
    done = launch(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "raise",
                              "--log-level", "warn"], tmp_path)
    assert time.monotonic() - started < FAILURE_BOUND
    assert done.returncode == 1, done.stderr  # ExitCode::kJobFailed
    log = done.stderr
    assert "[rank 1] [error] task 'first' of the epoch group raised:" in log
    assert "[rank 1] [error] Traceback (most recent call last):" in log
    assert '[rank 1] [error]     raise ValueError(f"boom on rank {ctx.rank}")' in log
    assert "[rank 1] [error] ValueError: boom on rank 1" in log
    assert ("epochrun: error: epoch group: rank 1: task 'first' of the epoch group on trainer_1: "
            "ValueError: boom on rank 1") in log
    assert "[rank 0] [error] Traceback" not in log and "[rank 2] [error] Traceback" not in log
    # Every rank ended with the failure (each wrote its record on the way out).
    for rank in range(3):
        record = json.loads((tmp_path / f"record-{rank}.json").read_text())
        assert record["exit_code"] == 1 and "summary" not in record
    assert latest(tmp_path / "ck").epoch == 1  # what was committed before stays


def test_a_raise_while_the_other_ranks_wait_in_a_collective_aborts_the_job(tmp_path):
    started = time.monotonic()
    done = launch(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "raise",
                              "--py_checks.blocked", "true", "--task-failure-timeout", "3",
                              "--log-level", "warn"], tmp_path)
    assert time.monotonic() - started < FAILURE_BOUND
    assert done.returncode == 1, done.stderr
    assert "[rank 1] [error] ValueError: boom on rank 1" in done.stderr
    assert "the other ranks did not learn of it within 3 s" in done.stderr
    assert "aborting the job" in done.stderr


def test_a_usage_error_raised_in_a_task_exits_with_the_usage_code(tmp_path):
    done = launch(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "raise",
                              "--py_checks.usage", "true", "--log-level", "warn"], tmp_path)
    assert done.returncode == 2, done.stderr  # ExitCode::kUsageError
    assert "UsageError: a usage error raised by rank 1" in done.stderr


def test_a_bad_option_is_one_line_and_exit_2_before_mpi_starts(tmp_path):
    done = launch(3, SGD, ["--py_sgd.features", "many"], tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("epochrun: error:")]
    assert len(errors) == 1 and "py_sgd.features" in errors[0], done.stderr
    done = launch(3, SGD, ["--job", "sgd_regression"], tmp_path)
    assert done.returncode == 2 and "unknown job 'sgd_regression'" in done.stderr


def wait_for(path, launcher, timeout=60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert launcher.poll() is None, "the run ended before " + path.name
        assert time.monotonic() < deadline, path.name + " never came"
        time.sleep(0.02)


SGD_SLOW = ["--py_sgd.pause", "0.15", "--log-level", "warn"]


def final_state(directory):
    checkpoint = latest(directory)
    return checkpoint.epoch, {name: checkpoint.replicated(name).tobytes()
                              for name in ("weights", "momentum", "steps", "loss")}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    where = tmp_path_factory.mktemp("uninterrupted")
    run_ok(3, SGD, ["--checkpoint-dir", "ck", *SGD_SLOW], where)
    return final_state(where / "ck")


@pytest.mark.parametrize("how", ["USR1 to mpirun", "TERM to rank 2"])
def test_a_preemption_signal_stops_after_the_epoch_with_exit_75_and_the_resume_ends_alike(
        tmp_path, uninterrupted, how):
    launcher = start(3, SGD, ["--checkpoint-dir", "ck", "--summary-json", "summary.json",
                              *SGD_SLOW], tmp_path)
    pids = rank_pids(launcher, 3)
    wait_for(tmp_path / "ck" / "epoch-000002.h5", launcher)
    if how.startswith("USR1"):
        os.kill(launcher.pid, signal.SIGUSR1)  # mpirun forwards it to every rank
    else:
        os.kill(pids[2], signal.SIGTERM)
    code, output = finish(launcher)
    assert code == 75, output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stop_kind"] == "preempted"
    assert summary["stop_reason"].startswith(
        "preempted (SIGUSR1" if how.startswith("USR1") else "preempted (SIGTERM on rank 2)")
    stopped = summary["last_committed_epoch"]
    assert 2 <= stopped < 12
    run_ok(3, SGD, ["--checkpoint-dir", "ck", "--resume-from-epoch", "latest", *SGD_SLOW],
           tmp_path)
    assert final_state(tmp_path / "ck") == uninterrupted


def sigint_a_rank(command, cwd, first_checkpoint, program):
    launcher = start_command(command, cwd)
    pids = rank_pids(launcher, 3, program)
    wait_for(first_checkpoint, launcher)
    os.kill(pids[1], signal.SIGINT)
    return finish(launcher)


def test_ctrl_c_ends_a_python_rank_as_it_ends_a_cpp_one(tmp_path):
    """SIGINT is not a preemption signal (unless --preempt-signals names INT): a C++ rank dies of
    it at once, and so does a Python rank, instead of raising KeyboardInterrupt at its next
    task."""
    program = os.environ.get("EPOCHRUN_PROGRAM", str(ROOT / "build" / "epochrun"))
    cpp = ["mpirun", "--oversubscribe", "-np", "3", program, "run", "--job", "sgd_regression",
           "--checkpoint-dir", "cpp", "--sgd_regression.max_epochs", "100000",
           "--sgd_regression.loss_threshold", "0", "--log-level", "warn"]
    cpp_code, cpp_output = sigint_a_rank(cpp, tmp_path, tmp_path / "cpp" / "epoch-000003.h5",
                                         "epochrun")
    python = ["mpirun", "--oversubscribe", "-np", "3", sys.executable, str(SGD),
              "--checkpoint-dir", "py", "--py_sgd.epochs", "1000", *SGD_SLOW]
    py_code, py_output = sigint_a_rank(python, tmp_path, tmp_path / "py" / "epoch-000002.h5",
                                       "python")
    assert cpp_code == 130, cpp_output
    assert py_code == cpp_code, py_output
    assert "exited on signal 2 (Interrupt)" in cpp_output
    assert "exited on signal 2 (Interrupt)" in py_output
    assert "KeyboardInterrupt" not in py_output
