"""Reading epochrun checkpoints in Python, verified: `epochrun.open(DIR)` is a checkpoint
directory (its committed epochs, `latest()` the newest that verifies, `epoch(N)`, the run
history and metrics); a checkpoint gives its global arrays (`array(name)`, whole or any
numpy index), per-node blobs by node (`blob(name, node)`, `blobs(node)`) and replicated blobs
(`replicated(name)`), every byte checked against the xxh64 its save recorded unless
`verify=False` is asked for. The format is docs/FORMAT.md; this is its reference reader.

It also runs jobs written in Python under epochrun's runner (epochrun.runner): `Job` declares
blobs, tasks, stop conditions and options as a C++ job does, and `run(job)` runs it with every
option of `epochrun run`; `CheckpointManager` checkpoints a loop of one's own, as Orbax's and
tf.train's managers do (that half needs the compiled extension epochrun._core, built by
CMake)."""

from .checkpoint import Checkpoint
from .directory import CheckpointDirectory, open
from .errors import (CheckpointError, CheckpointMismatch, CheckpointNotFound, CorruptCheckpoint,
                     Error, UsageError)
from .manager import CheckpointManager, SaveResult
from .runner import (Block, Blob, Job, Options, RunResult, TaskGroup, balanced_block, grid_block,
                     process_grid, run)

__all__ = [
    "Block",
    "Blob",
    "Checkpoint",
    "CheckpointDirectory",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointMismatch",
    "CheckpointNotFound",
    "CorruptCheckpoint",
    "Error",
    "Job",
    "Options",
    "RunResult",
    "SaveResult",
    "TaskGroup",
    "UsageError",
    "balanced_block",
    "grid_block",
    "open",
    "process_grid",
    "run",
]
__version__ = "1.0.0"
