"""A checkpoint manager for a loop of one's own, as Orbax's CheckpointManager,
tf.train.CheckpointManager and torch.distributed.checkpoint offer it, on libepochrun's manager
(include/epochrun/checkpoint_manager.hpp): the same collective saves into one shared HDF5 file
per epoch, commit protocol, judge, index, retention, metrics, node-local level and redundancy as
`epochrun run`.

    job = epochrun.Job("my_loop")                       # only its blobs are used
    job.global_array("u", np.float64, (1024, 1024))
    job.replicated("w", np.float32, (256,))
    with epochrun.CheckpointManager(job, "ck", async_checkpoint=True) as manager:
        restored = manager.restore()                    # the newest that verifies, or None
        if restored is None:
            manager.create()
        u, w = manager["u"], torch.from_numpy(manager["w"])   # this rank's memory, no copy
        for epoch in range((restored.epoch if restored else 0) + 1, 101):
            ...                                         # your step
            manager.save(epoch)                         # returns at once: written beside you
    # leaving the block waits for the save in flight and commits it

Every call but `[]`, `block` and `names` is collective: make it on every rank, in the same
order. The arrays are numpy arrays over the manager's own memory: a save reads them in place,
a restore writes into them (an array or tensor you hold over them sees the restored values).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np

from .errors import UsageError
from .runner import Block, Job, _core


@dataclass
class SaveResult:
    """What one save did (or, for `wait`, the asynchronous save it committed)."""

    epoch: int
    committed: bool  # committed to the checkpoint directory
    node_local: bool  # saved node-local only (local_dir levels), committed by its manifest
    in_background: bool  # still being written beside the caller: wait() commits it
    failure: Optional[str]  # why the save failed (nothing committed is touched)
    seconds: float  # the whole save
    blocked_seconds: float  # of those, the caller waited
    bytes: int  # this rank's array bytes


# The managers not closed yet, in the order they were opened: closed in that order at the
# interpreter's exit (a collective step: never left to the garbage collector, whose moment
# differs from rank to rank), before MPI ends.
_open: List["CheckpointManager"] = []


class CheckpointManager:
    """Checkpoints of the blobs `arrays` declares (an epochrun.Job: per-node blobs, replicated
    blobs, global arrays with their decomposition; its tasks are not used) in `directory`, on
    `comm` (an mpi4py communicator; by default MPI_COMM_WORLD, MPI started here when nothing has
    started it). Collective. The options are those of `epochrun run` that make sense outside the
    runner, named as its flags are:

    - async_checkpoint: a save returns once its write runs beside the loop (--async-checkpoint);
      max_staging_bytes caps the snapshot it takes (beyond it the save is synchronous)
    - local_dir, flush_every, flush_interval, local_keep, local_redundancy: the node-local level
      (--local-dir ...; "partner" or "xor:N" protect it against the loss of a host)
    - keep_last, keep_every: retention (--keep-last, --keep-every)
    - array_io ("auto", "direct", "mpiio") and mpi_io_hints: how global arrays are written
    - check_replicated, directory_lock, save_timeout (seconds), xdmf (a file for ParaView)
    - config: a JSON-able dict recorded in every checkpoint

    Opening takes the directory's lock and checks, before anything is written, that every rank
    sees the same directory and can write its node-local one: epochrun.UsageError or
    CheckpointError on every rank otherwise."""

    def __init__(self, arrays: Job, directory: Union[str, os.PathLike], *, comm: Any = None,
                 async_checkpoint: bool = False, max_staging_bytes: Optional[int] = None,
                 local_dir: Optional[str] = None, flush_every: Optional[int] = None,
                 flush_interval: Optional[float] = None, local_keep: Optional[int] = None,
                 local_redundancy: Optional[str] = None, keep_last: Optional[int] = None,
                 keep_every: Optional[int] = None, array_io: Optional[str] = None,
                 mpi_io_hints: Optional[Mapping[str, str]] = None, check_replicated: bool = False,
                 directory_lock: bool = True, save_timeout: Optional[float] = None,
                 xdmf: Optional[str] = None, config: Optional[Mapping[str, Any]] = None):
        if not isinstance(arrays, Job):
            raise TypeError("epochrun.CheckpointManager takes an epochrun.Job declaring its "
                            f"arrays, not {type(arrays).__name__}")
        given = {
            "async_checkpoint": bool(async_checkpoint),
            "check_replicated": bool(check_replicated),
            "directory_lock": bool(directory_lock),
        }
        for key, value in (("max_staging_bytes", max_staging_bytes), ("local_dir", local_dir),
                           ("flush_every", flush_every), ("flush_interval", flush_interval),
                           ("local_keep", local_keep), ("local_redundancy", local_redundancy),
                           ("keep_last", keep_last), ("keep_every", keep_every),
                           ("array_io", array_io), ("save_timeout", save_timeout),
                           ("xdmf", xdmf)):
            if value is not None:
                given[key] = _checked(key, value)
        if mpi_io_hints is not None:
            given["mpi_io_hints"] = {str(k): str(v) for k, v in dict(mpi_io_hints).items()}
        if config is not None:
            try:
                given["config_json"] = json.dumps(dict(config), sort_keys=True)
            except (TypeError, ValueError) as error:
                raise UsageError(f"config is not JSON: {error}") from None
        core = _core()
        self._workspace = core.Workspace()
        self._manager = core.CheckpointManager(arrays, dict(arrays.options._values),
                                               os.fspath(directory), comm, given, self._workspace)
        self.arrays_declared = arrays
        _open.append(self)

    # --- the loop's calls (collective) ---------------------------------------------------------

    def create(self) -> None:
        """Every declared array created anew (zeros, or a scalar's initial value), as a run's init
        group creates them."""
        self._manager.create()

    def restore(self, epoch: Union[int, str] = "latest") -> Optional[Any]:
        """Loads `epoch` (or "latest": the newest that verifies) into the arrays, at any rank count
        for global arrays (per-node blobs follow their on_rank_change rule); None when there is
        no checkpoint for "latest". What it loaded: `.epoch`, `.written_by_ranks`, `.node_local`
        (from the node-local copies), `.arrays` (the names). Raises CheckpointNotFound, CorruptCheckpoint,
        CheckpointMismatch as a run's resume fails."""
        if not (epoch == "latest" or (isinstance(epoch, (int, np.integer))
                                      and not isinstance(epoch, bool))):
            raise UsageError(f"restore takes an epoch number or 'latest', not {epoch!r}")
        return self._manager.restore(epoch)

    def save(self, epoch: int, arrays: Optional[Mapping[str, Any]] = None, *,
             last: bool = False) -> SaveResult:
        """Saves `epoch` of the arrays: each of `arrays` (name -> array, checked against its
        blob: its own array costs nothing, another is copied in) is put first. With
        async_checkpoint it returns once the write runs beside the caller, and the arrays may
        change at once. `last=True` writes it at once and to the checkpoint directory (the loop's
        final save). A failed save is in the result (failure), not raised."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise UsageError(f"save takes an epoch number of at least 0, not {epoch!r}")
        if arrays is not None and not isinstance(arrays, Mapping):
            raise UsageError("save's arrays are a mapping of blob names to arrays")
        return SaveResult(**self._manager.save(int(epoch), None if arrays is None
                                               else dict(arrays), bool(last)))

    def wait(self) -> Optional[SaveResult]:
        """Waits for the save in flight and commits it; None when none is."""
        done = self._manager.wait()
        return None if done is None else SaveResult(**done)

    def latest(self) -> Optional[int]:
        """The newest epoch committed to the checkpoint directory, the same on every rank."""
        return self._manager.latest()

    def close(self) -> None:
        """Waits for the save in flight, commits it and releases the directory. Idempotent."""
        if self in _open:
            _open.remove(self)
        self._manager.close()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exception: Any) -> None:
        self.close()

    # --- this rank's arrays (local) ------------------------------------------------------------

    def __getitem__(self, name: str) -> np.ndarray:
        """This rank's array `name`, over the manager's memory (the same object until a restore
        or create() changes its storage; one you hold is written into instead)."""
        return self._manager.array(name)

    def __setitem__(self, name: str, value: Any) -> None:
        """Copies `value` into the array `name` (its dtype and shape, C-contiguous)."""
        self._manager.put(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self._workspace.names()

    def names(self) -> List[str]:
        return self._workspace.names()

    def block(self, name: str) -> Block:
        """A global array's block on this rank."""
        return self._manager.block(name)

    @property
    def comm(self) -> Any:
        """The communicator the manager was opened on, with epochrun's typed collectives
        (`.mpi4py` for mpi4py's)."""
        return self._manager.comm

    @property
    def closed(self) -> bool:
        return self._manager.closed

    def arrays(self) -> Dict[str, np.ndarray]:
        """Every array, by name."""
        return {name: self[name] for name in self.names()}


def _checked(key: str, value: Any) -> Any:
    if key in ("local_dir", "xdmf", "local_redundancy", "array_io"):
        return str(value)
    if key in ("flush_interval", "save_timeout"):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise UsageError(f"{key} is a number of seconds, not {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise UsageError(f"{key} is a whole number, not {value!r}")
    if key == "max_staging_bytes" and value < 0:
        raise UsageError(f"max_staging_bytes is at least 0, not {value}")
    return int(value)


def _close_open_managers() -> None:
    while _open:
        _open[0].close()


def _abort_on_an_uncaught_exception(kind: Any, value: Any, traceback: Any) -> None:
    """A rank that ends with an exception while a manager is open would leave the others waiting
    in the manager's next collective call (and its own exit waiting for theirs): as `python -m
    mpi4py` does, the traceback is printed and every rank is ended (MPI_Abort, exit code 1).
    The committed checkpoints stay as they are; a save in flight is lost, as at a kill."""
    _previous_excepthook(kind, value, traceback)
    if _open and not issubclass(kind, (SystemExit, KeyboardInterrupt)):
        sys.stderr.flush()
        _core()._abort_mpi(1)


_previous_excepthook = sys.excepthook
sys.excepthook = _abort_on_an_uncaught_exception


# Registered after the runner's end of MPI (this module is imported after it): runs before it.
atexit.register(_close_open_managers)
