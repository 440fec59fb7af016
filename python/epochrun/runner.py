"""Jobs written in Python, run by epochrun's own runner (libepochrun, through epochrun._core).

A job is declared as a C++ job is (include/epochrun/job.hpp): blobs with a dtype and a shape --
per-node, replicated, or global arrays split over the ranks -- tasks in the init, epoch,
download and exit groups, stop conditions and options; `run(job)` runs it with every option of
`epochrun run`, from sys.argv. A task gets a TaskContext: `ctx["name"]` is the blob as a numpy
array over the workspace's own memory (the checkpoint saves it and a resume loads into it
without a copy, and the same memory serves every task), `ctx.comm` a communicator with typed
collectives on numpy arrays, `ctx.epoch`, `ctx.options`.

    job = epochrun.Job("running_mean")
    job.option("samples", 1000, "numbers each rank draws per epoch")
    job.blob("totals", np.float64, (2,), output=True)

    @job.epoch
    def draw(ctx):
        ...

    raise SystemExit(epochrun.run(job).exit_code)
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import UsageError

# Open MPI's default MPI-IO component (OMPIO) is known to hang parallel HDF5's collective writes
# in which some ranks have nothing to write; the runner chooses ROMIO when it starts MPI itself
# (MpiSession), and this does the same for an MPI that mpi4py starts after this import. A value
# the user set wins.
os.environ.setdefault("OMPI_MCA_io", "romio321")


def _core():
    try:
        from . import _core as core
    except ImportError as error:
        raise ImportError(
            "epochrun's runner needs its compiled part, epochrun._core: build epochrun with CMake "
            "(with python3-dev and pybind11-dev installed) and put build/python on PYTHONPATH, or "
            "install it (cmake --install)") from error
    return core


class Block(NamedTuple):
    """A rank's part of a global array: elements [start[d], start[d] + count[d]) of each
    dimension d."""

    start: Tuple[int, ...]
    count: Tuple[int, ...]

    @property
    def slices(self) -> Tuple[slice, ...]:
        """The block as an index of the global array."""
        return tuple(slice(s, s + c) for s, c in zip(self.start, self.count))


def balanced_block(global_shape: Sequence[int], ranks: int, rank: int) -> Block:
    """The default decomposition: the shape split over the process grid MPI_Dims_create would
    choose, the first n % p ranks of a dimension one element more."""
    return _core().balanced_block(list(global_shape), ranks, rank)


def grid_block(global_shape: Sequence[int], grid: Sequence[int], rank: int) -> Block:
    """The block of `rank` when the shape is split over `grid` (ranks per dimension, numbered
    row-major). `lambda shape, rank, ranks: grid_block(shape, (ranks, 1), rank)` is a block rule
    of bands of whole rows."""
    return _core().grid_block(list(global_shape), list(grid), rank)


def process_grid(ranks: int, dimensions: int) -> List[int]:
    return _core().process_grid(ranks, dimensions)


# The dtypes a blob holds, by epochrun's names (dtype.hpp).
_DTYPE_CODES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8",
}

Shape = Union[int, Sequence[int], Callable[["Options"], Any]]
TaskFunction = Callable[[Any], Any]
BlockRule = Callable[[Tuple[int, ...], int, int], Any]


def _dtype(dtype: Any, what: str) -> np.dtype:
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise UsageError(f"{what}: {dtype!r} is not a numpy dtype") from None
    if resolved not in _DTYPE_CODES:
        raise UsageError(f"{what}: dtype {resolved} is not one epochrun holds "
                         "(float32, float64, int32, int64, uint8)")
    return resolved


def _shape(shape: Any, what: str) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise UsageError(f"{what}: shape {shape!r} is not a tuple of sizes") from None
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise UsageError(f"{what}: shape {shape!r} is not a tuple of sizes")
    return tuple(int(dim) for dim in dims)


class Options:
    """A job's option values: `options.learning_rate` or `options["learning_rate"]`. Before a run
    they are the declared defaults; during it, the values the command line and --config gave."""

    def __init__(self, values: Optional[Mapping[str, Any]] = None):
        object.__setattr__(self, "_values", dict(values or {}))

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(f"no job option '{key}'") from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("job options are set by the command line (--<job>.<key>)")

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def _set(self, values: Mapping[str, Any]) -> None:
        # In place: tasks and the job hold this one object.
        self._values.clear()
        self._values.update(values)

    def __repr__(self) -> str:
        return f"Options({self._values!r})"


@dataclass
class Blob:
    """A declared blob (what Job.blob and its siblings return): its name, dtype and kind, usable
    in place of the name (`ctx[handle]`, `handle.of(ctx)`)."""

    name: str
    dtype: np.dtype
    kind: str  # "per_node", "replicated" or "global_array"
    shape: Shape
    initial: Any = None
    output: bool = False
    on_rank_change: Any = None
    block_rule: Optional[BlockRule] = None
    opaque: bool = False

    def of(self, ctx: Any) -> np.ndarray:
        """This rank's value in the context `ctx`, a numpy array over the workspace's memory."""
        return ctx[self.name]

    def block(self, ctx: Any) -> Block:
        """A global array's block on this rank."""
        return ctx.block(self.name)


class TaskGroup:
    """One of a job's four groups of tasks; tasks run in order on every rank."""

    def __init__(self, name: str):
        self.name = name
        self.tasks: List[Tuple[str, TaskFunction]] = []

    def add(self, name: str, run: Optional[TaskFunction] = None):
        """Adds task `name` (usable as a decorator: `@group.add("name")`)."""
        if run is None:
            return lambda function: self.add(name, function)
        if not callable(run):
            raise UsageError(f"task '{name}' of the {self.name} group is not callable")
        self.tasks.append((str(name), run))
        return run

    def add_first(self, name: str, run: TaskFunction) -> TaskFunction:
        """Adds a task that runs before those added so far."""
        if not callable(run):
            raise UsageError(f"task '{name}' of the {self.name} group is not callable")
        self.tasks.insert(0, (str(name), run))
        return run

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass
class _ResolvedBlob:
    name: str
    kind: str
    dtype: str  # epochrun's name: "f64", ..., "bytes"
    shape: Tuple[int, ...]
    initial: Any
    output: bool
    on_rank_change: Any
    block_rule: Optional[BlockRule]


@dataclass
class _Resolved:
    """The declaration with every option-dependent value resolved: what the C++ Job is built
    from."""

    name: str
    blobs: List[_ResolvedBlob]
    groups: Dict[str, List[Tuple[str, TaskFunction]]]
    stop_conditions: List[Tuple[str, Callable[[Any], Any]]]
    run_defining: List[str]
    epoch_limit: Optional[int]


class Job:
    """A job declared in Python: what include/epochrun/job.hpp declares in C++.

    Shapes (and the epoch limit) may be functions of the job's options, called with their
    parsed values when the run starts: `job.blob("w", np.float64, lambda o: (o.features,))`.
    """

    def __init__(self, name: str, summary: str = ""):
        _core().validate_name(name, "job name")
        self.name = name
        self.summary = summary
        self.init_group = TaskGroup("init")  # once, only when starting from scratch
        self.epoch_group = TaskGroup("epoch")  # in a loop
        self.download_group = TaskGroup("download")  # once after the loop, outputs gathered
        self.exit_group = TaskGroup("exit")  # once at the very end
        self.options = Options()
        self._options: Dict[str, Tuple[Any, str, bool]] = {}
        self._blobs: Dict[str, Blob] = {}
        self._stop_conditions: List[Tuple[str, Callable[[Any], Any]]] = []
        self._epoch_limit: Any = None

    # --- blobs ---------------------------------------------------------------------------------

    def _declare(self, blob: Blob) -> Blob:
        _core().validate_name(blob.name, "blob name")
        if blob.name in self._blobs:
            raise UsageError(f"blob '{blob.name}' is declared twice")
        if blob.kind != "per_node" and blob.output:
            raise UsageError(f"blob '{blob.name}': only per-node blobs are gathered as outputs")
        if blob.on_rank_change not in (None, "recreate") and not callable(blob.on_rank_change):
            raise UsageError(f"blob '{blob.name}': on_rank_change is 'recreate' or a function")
        if not callable(blob.shape):
            blob.shape = _shape(blob.shape, f"blob '{blob.name}'")
            if blob.kind == "global_array" and not blob.shape:
                raise UsageError(f"global array '{blob.name}' needs at least one dimension")
        if blob.initial is not None:
            value = np.asarray(blob.initial)
            if value.shape != () or not np.can_cast(value.dtype, blob.dtype, "same_kind"):
                raise UsageError(f"blob '{blob.name}': initial value {blob.initial!r} is not a "
                                 f"{blob.dtype} scalar")
            blob.initial = value.astype(blob.dtype).item()
        self._blobs[blob.name] = blob
        return blob

    def blob(self, name: str, dtype: Any, shape: Shape, *, output: bool = False,
             on_rank_change: Any = None) -> Blob:
        """A per-node blob: every rank its own array, created zero-filled by the init group.
        `output=True` gathers it to rank 0 for the download and exit groups
        (`ctx.gathered(name)`). `on_rank_change` says what a resume on another rank count does
        with it: "recreate" (zeros again), or f(old_values, rank, ranks) -> this rank's new value
        from every old rank's; without it such a resume is refused."""
        return self._declare(Blob(name, _dtype(dtype, f"blob '{name}'"), "per_node", shape,
                                  output=output, on_rank_change=on_rank_change))

    def scalar(self, name: str, dtype: Any, initial: Any = 0, *, output: bool = False,
               on_rank_change: Any = None) -> Blob:
        """A per-node scalar (shape ()), created with `initial`."""
        return self._declare(Blob(name, _dtype(dtype, f"blob '{name}'"), "per_node", (),
                                  initial=initial, output=output, on_rank_change=on_rank_change))

    def bytes(self, name: str, size: Union[int, Callable[[Options], int]], *, output: bool = False,
              on_rank_change: Any = None) -> Blob:
        """Opaque per-node state of `size` bytes (dtype "bytes" in the checkpoint, uint8 here)."""
        shape = (lambda options: (size(options),)) if callable(size) else (size,)
        return self._declare(Blob(name, np.dtype(np.uint8), "per_node", shape, output=output,
                                  on_rank_change=on_rank_change, opaque=True))

    def replicated(self, name: str, dtype: Any, shape: Shape) -> Blob:
        """The same value on every rank (a model's parameters): stored once, loaded by every rank
        at any rank count. The job keeps the ranks' values equal (--check-replicated checks)."""
        return self._declare(Blob(name, _dtype(dtype, f"blob '{name}'"), "replicated", shape))

    def replicated_scalar(self, name: str, dtype: Any, initial: Any = 0) -> Blob:
        return self._declare(Blob(name, _dtype(dtype, f"blob '{name}'"), "replicated", (),
                                  initial=initial))

    def global_array(self, name: str, dtype: Any, global_shape: Shape,
                     block_rule: Optional[BlockRule] = None) -> Blob:
        """One array of `global_shape` split over the ranks: each rank holds its block
        (`ctx.block(name)`), `block_rule(global_shape, rank, ranks) -> (start, count)` or by
        default balanced_block. Stored as one dataset of the global shape; a resume on another
        rank count re-partitions it."""
        if block_rule is not None and not callable(block_rule):
            raise UsageError(f"global array '{name}': block_rule is not callable")
        return self._declare(Blob(name, _dtype(dtype, f"global array '{name}'"), "global_array",
                                  global_shape, block_rule=block_rule))

    # --- options, stop conditions ------------------------------------------------------------

    def option(self, key: str, default: Union[int, float, str, bool], help: str = "", *,
               run_defining: bool = False) -> None:
        """Declares `--<job>.<key>` (and the key of the INI section [<job>]) with its default,
        whose type (int, float, str, bool) is the option's. `run_defining=True`: a resume may not
        change it (the problem's size or seed; see README "Configuration changes on resume")."""
        _core().validate_name(key, "job option key")
        if key in self._options:
            raise UsageError(f"job option '{key}' is declared twice")
        if not isinstance(default, (bool, int, float, str)):
            raise UsageError(f"job option '{key}': the default {default!r} is not an int, float, "
                             "str or bool")
        if isinstance(default, int) and not isinstance(default, bool) and \
                not -2**63 <= default < 2**63:
            raise UsageError(f"job option '{key}': {default} does not fit 64 bits")
        self._options[key] = (default, help, run_defining)
        self.options._set({**self.options._values, key: default})

    def add_stop_condition(self, name: str, holds: Optional[Callable[[Any], Any]] = None):
        """`holds(blobs)` after every epoch, on every rank (`blobs["loss"]`: read-only arrays);
        when it is true on any rank, the job stops after that epoch's checkpoint. Usable as a
        decorator: `@job.add_stop_condition("converged")`."""
        if holds is None:
            return lambda function: self.add_stop_condition(name, function)
        if not callable(holds):
            raise UsageError(f"stop condition '{name}' is not callable")
        self._stop_conditions.append((str(name), holds))
        return holds

    def add_epoch_limiter(self, num_epochs: Union[int, str, Callable[[Options], int]]) -> None:
        """Stops the job after `num_epochs` epochs, counted in a replicated blob
        ("epochs_remaining") so that it survives a resume (epoch_limiter.hpp). An option's key
        takes the limit from that option."""
        self._epoch_limit = num_epochs

    # --- tasks (decorators) ----------------------------------------------------------------

    def init(self, run: TaskFunction) -> TaskFunction:
        """`@job.init`: a task of the init group, named after the function."""
        return self.init_group.add(run.__name__, run)

    def epoch(self, run: TaskFunction) -> TaskFunction:
        return self.epoch_group.add(run.__name__, run)

    def download(self, run: TaskFunction) -> TaskFunction:
        return self.download_group.add(run.__name__, run)

    def exit(self, run: TaskFunction) -> TaskFunction:
        return self.exit_group.add(run.__name__, run)

    # --- what the runner reads -----------------------------------------------------------------

    def _declared_options(self) -> List[Tuple[str, Any, str]]:
        return [(key, default, help) for key, (default, help, _) in self._options.items()]

    def _resolve(self, values: Mapping[str, Any]) -> _Resolved:
        self.options._set(values)
        blobs = []
        for blob in self._blobs.values():
            shape = blob.shape
            if callable(shape):
                shape = _shape(shape(self.options), f"blob '{blob.name}'")
                if blob.kind == "global_array" and not shape:
                    raise UsageError(f"global array '{blob.name}' needs at least one dimension")
            code = "bytes" if blob.opaque else _DTYPE_CODES[blob.dtype]
            blobs.append(_ResolvedBlob(blob.name, blob.kind, code, shape, blob.initial,
                                       blob.output, blob.on_rank_change, blob.block_rule))
        limit = self._epoch_limit
        if isinstance(limit, str):
            limit = self.options[limit]
        elif callable(limit):
            limit = limit(self.options)
        if limit is not None:
            limit = int(limit)
        groups = {group.name: list(group.tasks) for group in
                  (self.init_group, self.epoch_group, self.download_group, self.exit_group)}
        run_defining = [key for key, (_, _, defining) in self._options.items() if defining]
        return _Resolved(self.name, blobs, groups, list(self._stop_conditions), run_defining,
                         limit)


@dataclass
class RunResult:
    """What `run` returns on each rank."""

    exit_code: int  # what `epochrun run` would exit with (README "Exit codes")
    # This rank's run summary, as --summary-json writes rank 0's; None when the run failed (or
    # printed its help).
    summary: Optional[Dict[str, Any]]
    # The workspace after the run: this rank's blobs as numpy arrays (the same memory the tasks
    # used; it stays valid as long as an array refers to it).
    blobs: Dict[str, np.ndarray] = field(default_factory=dict)
    # Rank 0, when the job finished: every node's declared outputs, {node: {blob: array}}.
    outputs: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)


def _names_the_job(arguments: Sequence[str]) -> bool:
    return any(argument == "--job" or argument.startswith("--job=") for argument in arguments)


def run(job: Job, args: Optional[Sequence[str]] = None, *, comm: Any = None) -> RunResult:
    """Runs `job` on every rank with the options of `epochrun run` (README "Running jobs"):
    `args`, by default sys.argv[1:] (`--job` is the job's own name unless given). Call it on
    every rank: `mpirun -np 3 python3 my_job.py --checkpoint-dir ck --resume-from-epoch latest`.

    The job runs on `comm`, an mpi4py communicator, or on MPI_COMM_WORLD (MPI started here when
    nothing has started it, and ended at the interpreter's exit). Failures are the runner's, as
    for a C++ job: one line on stderr and the exit code from the table (a task's exception, with
    its traceback in its rank's log, ends every rank with 1; epochrun.UsageError with 2). Only a
    mistake in calling run itself raises."""
    if not isinstance(job, Job):
        raise TypeError(f"epochrun.run takes an epochrun.Job, not {type(job).__name__}")
    arguments = [str(argument) for argument in (sys.argv[1:] if args is None else args)]
    if not _names_the_job(arguments):
        arguments = ["--job", job.name, *arguments]
    core = _core()
    workspace = core.Workspace()
    try:
        exit_code, summary = core.run(job, ["run", *arguments], workspace, comm)
    finally:
        workspace._release_views()
    result = RunResult(exit_code, None)
    if summary is not None:
        with tempfile.TemporaryDirectory(prefix="epochrun-summary-") as directory:
            file = os.path.join(directory, "summary.json")
            summary.write_json(file)
            with open(file, encoding="utf-8") as text:
                result.summary = json.load(text)
        result.outputs = summary.outputs()
    result.blobs = {name: workspace.array(name) for name in workspace.names()}
    return result


def _end_mpi() -> None:
    # Only when a run loaded the extension (and may have started MPI); never imported at exit.
    core = sys.modules.get(__package__ + "._core")
    if core is not None:
        core._end_mpi()


atexit.register(_end_mpi)
