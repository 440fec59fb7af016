"""Checkpoints written by the real program on real MPI ranks, once per test session, small
enough that the whole suite takes well under a minute: heat_diffusion on 3 ranks and resumed
on 2, sgd_regression and sum_pipeline on 3. The program is $EPOCHRUN_PROGRAM, or build/epochrun
of this tree."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))  # the package of this tree, not an installed one

# Every launch is bounded: a hung run fails its test instead of holding CI.
TIMEOUT = 120


def program():
    path = Path(os.environ.get("EPOCHRUN_PROGRAM", ROOT / "build" / "epochrun"))
    if not path.exists():
        pytest.skip(f"{path} is not built (cmake --build build --target epochrun_program)")
    return path


def mpi_environment():
    environment = dict(os.environ)
    if os.geteuid() == 0:
        environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    return environment


def run_job(ranks, arguments, cwd):
    """`mpirun -np RANKS epochrun run ARGUMENTS` in `cwd`; its completed process."""
    command = ["mpirun", "--oversubscribe", "-np", str(ranks), str(program()), "run",
               "--log-level", "warn", *arguments]
    done = subprocess.run(command, cwd=cwd, env=mpi_environment(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


def epochrun_cli(*arguments, cwd=None, check=True):
    """`epochrun ARGUMENTS` (inspect needs no MPI launcher); its completed process."""
    done = subprocess.run([str(program()), *map(str, arguments)], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)
    if check:
        assert done.returncode == 0, f"{arguments}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


HEAT = ["--job", "heat_diffusion", "--heat_diffusion.rows", "48", "--heat_diffusion.columns", "40"]


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """The directories of the session's runs, by name: heat (epochs 0 to 3 on 3 ranks, 4 and 5
    resumed on 2, with --xdmf heat.xmf beside it), heat4 (4 ranks: a 2 x 2 process grid, whose
    writer blocks are not bands of whole rows), sgd, sum."""
    top = tmp_path_factory.mktemp("runs")
    run_job(3, [*HEAT, "--checkpoint-dir", "heat", "--num-epochs", "3", "--xdmf", "heat.xmf"], top)
    run_job(2, [*HEAT, "--checkpoint-dir", "heat", "--num-epochs", "5", "--xdmf", "heat.xmf",
                "--resume-from-epoch", "latest"], top)
    run_job(4, [*HEAT, "--checkpoint-dir", "heat4", "--num-epochs", "1"], top)
    run_job(3, ["--job", "sgd_regression", "--checkpoint-dir", "sgd", "--num-epochs", "3",
                "--sgd_regression.samples", "600", "--sgd_regression.features", "8"], top)
    run_job(3, ["--job", "sum_pipeline", "--checkpoint-dir", "sum"], top)
    return {name: top / name for name in ("heat", "heat4", "sgd", "sum")} | {"top": top}


@pytest.fixture
def copy_of(runs, tmp_path):
    """A copy of one of the session's directories, for a test that damages it."""
    def copy(name):
        target = tmp_path / name
        shutil.copytree(runs[name], target)
        return target
    return copy


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def summary(path):
    return json.loads(Path(path).read_text())


# The integrity header's fields (docs/FORMAT.md, "Inside a file"), for tests that forge one.
def _u64(data, at):
    return int.from_bytes(data[at : at + 8], "little")


def _put_u64(data, at, value):
    data[at : at + 8] = value.to_bytes(8, "little")


def record_of(path):
    """(version, the record's bytes) of the layout record of the file at `path`."""
    data = Path(path).read_bytes()
    head = 72 + 16 * _u64(data, 56)
    assert data[head : head + 16] == b"EPOCHRUN-LAYOUT\n"
    length = _u64(data, head + 24)
    return _u64(data, head + 16), data[head + 48 : head + 48 + length]


def write_record(path, version, record):
    """Replaces the layout record of the file at `path` by `record` of `version`, both its
    checksums recomputed (a forger's work: nothing a reader can tell from the writer's)."""
    data = bytearray(Path(path).read_bytes())
    head = 72 + 16 * _u64(data, 56)
    user_block = _u64(data, 32)
    data[head + 48 : user_block] = bytes(user_block - head - 48)
    data[head + 48 : head + 48 + len(record)] = record
    _put_u64(data, head + 16, version)
    _put_u64(data, head + 24, len(record))
    _put_u64(data, head + 32, xxhash.xxh64_intdigest(record))
    _put_u64(data, head + 40, xxhash.xxh64_intdigest(bytes(data[head : head + 40])))
    Path(path).write_bytes(bytes(data))


def reseal(path):
    """Records the file's size and the hash of its metadata as they are now in its integrity
    header, and the header's own checksum (a forger's work after changing the metadata); the
    layout record stays as it was written, bound to the metadata hash of the time."""
    data = bytearray(Path(path).read_bytes())
    user_block, count = _u64(data, 32), _u64(data, 56)
    extents = [(_u64(data, 64 + 16 * i), _u64(data, 72 + 16 * i)) for i in range(count)]
    state, position = xxhash.xxh64(), user_block
    for offset, length in extents:
        state.update(bytes(data[position:offset]))
        position = offset + length
    state.update(bytes(data[position:]))
    _put_u64(data, 40, len(data))
    _put_u64(data, 48, state.intdigest())
    hashed = 64 + 16 * count
    _put_u64(data, hashed, xxhash.xxh64_intdigest(bytes(data[:hashed])))
    Path(path).write_bytes(bytes(data))
