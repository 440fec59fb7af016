"""Reading epochrun checkpoints in Python, verified: `epochrun.open(DIR)` is a checkpoint
directory (its committed epochs, `latest()` the newest that verifies, `epoch(N)`, the run
history and metrics); a checkpoint gives its global arrays (`array(name)`, whole or any
numpy index), per-node blobs by node (`blob(name, node)`, `blobs(node)`) and replicated blobs
(`replicated(name)`), every byte checked against the xxh64 its save recorded unless
`verify=False` is asked for. The format is docs/FORMAT.md; this is its reference reader."""

from .checkpoint import Checkpoint
from .directory import CheckpointDirectory, open
from .errors import CheckpointError, CheckpointMismatch, CheckpointNotFound, CorruptCheckpoint

__all__ = [
    "Checkpoint",
    "CheckpointDirectory",
    "CheckpointError",
    "CheckpointMismatch",
    "CheckpointNotFound",
    "CorruptCheckpoint",
    "open",
]
__version__ = "1.0.0"
