"""Python jobs run by epochrun's runner on real MPI ranks (mpirun, 3 ranks by default, real
checkpoint files), with the package of the build tree: $EPOCHRUN_PYTHONPATH, or build/python
(which holds epochrun/_core*.so beside links to python/epochrun). Every launch is bounded."""

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILD_PYTHON = Path(os.environ.get("EPOCHRUN_PYTHONPATH", ROOT / "build" / "python"))
JOBS = Path(__file__).resolve().parent / "jobs"
# The reader of the build tree's package (the same files as python/epochrun), for the checks.
sys.path.insert(0, str(BUILD_PYTHON))

# Every launch is bounded: a hung run fails its test instead of holding CI.
TIMEOUT = 120


def require_bindings():
    if not glob.glob(str(BUILD_PYTHON / "epochrun" / "_core*.so")):
        pytest.skip(f"{BUILD_PYTHON}/epochrun/_core is not built (cmake --build build --target "
                    "epochrun_python_core; it needs python3-dev, pybind11-dev, python3-mpi4py)")


def environment(extra=None):
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    env["PYTHONPATH"] = str(BUILD_PYTHON)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def mpirun_command(ranks, script, arguments):
    return ["mpirun", "--oversubscribe", "-np", str(ranks), sys.executable, str(script),
            *map(str, arguments)]


def launch(ranks, script, arguments, cwd, extra_env=None, timeout=TIMEOUT):
    """`mpirun -np RANKS python3 SCRIPT ARGUMENTS` in `cwd`; its completed process (any exit)."""
    require_bindings()
    return subprocess.run(mpirun_command(ranks, script, arguments), cwd=cwd,
                          env=environment(extra_env), capture_output=True, text=True,
                          timeout=timeout)


def run_ok(ranks, script, arguments, cwd, extra_env=None):
    done = launch(ranks, script, arguments, cwd, extra_env)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


# The launchers started in the background by the test running now.
_started = []


def start(ranks, script, arguments, cwd, extra_env=None):
    """The same launch in the background (its own session, so that a kill reaches only it)."""
    require_bindings()
    return start_command(mpirun_command(ranks, script, arguments), cwd, extra_env)


def start_command(command, cwd, extra_env=None):
    launcher = subprocess.Popen(command, cwd=cwd, env=environment(extra_env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    _started.append(launcher)
    return launcher


@pytest.fixture(autouse=True)
def no_launcher_left():
    """A test that fails while its run is still going ends that run (its whole session)."""
    yield
    while _started:
        launcher = _started.pop()
        if launcher.poll() is None:
            os.killpg(launcher.pid, 9)
            launcher.communicate()


def children(pid):
    """The pids of the direct children of `pid` (mpirun's: the ranks)."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(Path(stat).parent.name))
    return found


def rank_pids(launcher, ranks, program="python", timeout=30):
    """The ranks' pids once all of them run (processes of `program` under mpirun)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [pid for pid in children(launcher.pid) if _runs(pid, program)]
        if len(pids) == ranks:
            return sorted(pids)
        if launcher.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the {ranks} ranks of mpirun {launcher.pid} did not all start")


def _runs(pid, program):
    try:
        return program in Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False


def kill_rank_while_running(launcher, pid):
    """SIGKILL to rank `pid` if its run is still going on. A rank may end between the check and
    the kill (the run finishing just then; seen once: ProcessLookupError): that is a kill after
    the run's end, which the callers try again, sooner."""
    if launcher.poll() is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def finish(launcher, timeout=TIMEOUT):
    """The launcher's exit code and output, within `timeout` (a hang fails the test)."""
    try:
        out, err = launcher.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, 9)
        out, err = launcher.communicate()
        raise AssertionError(f"mpirun did not end within {timeout} s\n{out}{err}")
    return launcher.returncode, out + err


def latest(directory):
    import epochrun
    return epochrun.open(directory).latest()
