"""slurm/epochrun.sbatch running a Python job (EPOCHRUN_PYTHON_JOB) on a real single-node SLURM
cluster (the project's own, tests/clusters/slurm, started here and stopped at the end), launched with mpirun and with
srun, preempted with `scancel --signal=USR1 --full` once epoch 3 is committed: the ranks
checkpoint the epoch in progress and exit 75, the script requeues the job, the next start
resumes from it, and the job ends COMPLETED with a final checkpoint bit-identical to an
uninterrupted run's. Run by python_slurm_tests (label slurm: never beside the other tests of the
cluster)."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import JOBS, ROOT, environment, latest, require_bindings, run_ok

SLURM_TOOLS = ROOT / "tests" / "clusters" / "slurm"
# Where the cluster keeps its config and daemons' files: always this one, whatever the caller's
# environment says, so that the test talks to the cluster it started and stops only that.
SLURM_STATE = "/run/epochrun-slurm"
BATCH_SCRIPT = ROOT / "slurm" / "epochrun.sbatch"
SGD = JOBS / "sgd_job.py"
OPTIONS = ["--py_sgd.pause", "0.4", "--log-level", "warn"]
CASE_SECONDS = 240  # each job, its restarts included (a hang fails the case)


def bounded(command, cwd="/", env=None, timeout=60):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return done


@pytest.fixture(scope="module")
def cluster():
    require_bindings()
    if os.geteuid() != 0:
        pytest.skip("the SLURM test cluster (tests/clusters/slurm) starts its daemons as root")
    tools_env = dict(os.environ, EPOCHRUN_SLURM_STATE=SLURM_STATE)
    started = bounded([str(SLURM_TOOLS / "start-slurm.sh")], env=tools_env, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = SLURM_STATE + "/slurm.conf"
    yield
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous
    bounded([str(SLURM_TOOLS / "stop-slurm.sh")], env=tools_env, timeout=120)


def job_state(job_id):
    out = bounded(["scontrol", "-o", "show", "job", job_id]).stdout
    fields = {key: re.search(key + r"=(\S+)", out) for key in ("JobState", "Reason", "Restarts")}
    return {key: match.group(1) if match else "" for key, match in fields.items()}


def has_step_processes(job_id):
    prefix = f"slurmstepd: [{job_id}.".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().startswith(prefix):
                return True
        except OSError:
            pass
    return False


def newest_epoch(checkpoints):
    epochs = [int(p.name[6:12]) for p in checkpoints.glob("epoch-??????.h5")]
    return max(epochs, default=-1)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    where = tmp_path_factory.mktemp("uninterrupted")
    run_ok(3, SGD, ["--checkpoint-dir", "ck", *OPTIONS], where)
    checkpoint = latest(where / "ck")
    return checkpoint.epoch, {name: checkpoint.replicated(name).tobytes()
                              for name in ("weights", "momentum", "steps", "loss")}


@pytest.mark.parametrize("launcher", ["mpirun", "srun"])
def test_a_python_job_preempted_under_slurm_requeues_itself_and_ends_bit_identical(
        cluster, uninterrupted, tmp_path, launcher):
    os.chmod(tmp_path, 0o755)  # slurmd runs the script from here
    env = environment({"EPOCHRUN_PYTHON_JOB": str(SGD), "EPOCHRUN_LAUNCHER": launcher,
                       "EPOCHRUN_PYTHON": "/usr/bin/python3",
                       # Ranks SLURM starts do not know they share the cores.
                       "OMPI_MCA_mpi_yield_when_idle": "1"})
    name = f"python-{launcher}"
    submitted = bounded(["sbatch", "--parsable", "--overcommit", "--ntasks=3",
                         f"--job-name={name}", "--output=job.out", str(BATCH_SCRIPT), *OPTIONS],
                        cwd=tmp_path, env=env)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    run_dir = tmp_path / "epochrun-runs" / f"sgd_job-{name}"
    checkpoints = run_dir / "checkpoints"
    deadline = time.monotonic() + CASE_SECONDS
    while newest_epoch(checkpoints) < 3:
        assert job_state(job_id)["JobState"] != "COMPLETED", "finished before it was preempted"
        assert time.monotonic() < deadline, "never got under way"
        time.sleep(0.1)
    sent = bounded(["scancel", "--signal=USR1", "--full", job_id])
    assert sent.returncode == 0, sent.stderr
    pending_since = None
    while time.monotonic() < deadline:
        state = job_state(job_id)
        if state["JobState"] in ("", "RUNNING", "COMPLETING", "REQUEUED", "CONFIGURING",
                                 "SIGNALING"):
            pending_since = None
        elif state["JobState"] == "PENDING":
            # SLURM's requeue delay (two minutes) skipped, once the last run has ended.
            if state["Restarts"] not in ("", "0"):
                pending_since = pending_since or time.monotonic()
                if time.monotonic() - pending_since >= 2 and state["Reason"] == "BeginTime" \
                        and not has_step_processes(job_id):
                    bounded(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
                    pending_since = None
        else:
            break
        time.sleep(0.1)
    output = (tmp_path / "job.out").read_text()
    assert state["JobState"] == "COMPLETED", f"{state}\n{output}"
    assert int(state["Restarts"]) >= 1, output
    assert "passing it on to the ranks as SIGUSR1" in output
    assert "requeued job" in output
    # Every rank stopped by itself (exit 75), none was ended by the signal.
    assert not re.search(r"task [0-9]+: (?!Exited with exit code)|exited on signal", output), output
    checkpoint = latest(checkpoints)
    got = checkpoint.epoch, {name: checkpoint.replicated(name).tobytes()
                             for name in ("weights", "momentum", "steps", "loss")}
    assert got == uninterrupted, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["job"] == "py_sgd"
    assert summary["restart_count"] == int(state["Restarts"])
    history = [json.loads(line) for line in (checkpoints / "runs.jsonl").read_text().splitlines()]
    assert history[0]["exit_code"] == 75 and history[-1]["exit_code"] == 0
