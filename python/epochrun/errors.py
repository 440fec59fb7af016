"""The errors epochrun raises in Python: the classes of epochrun's own table
(src/base/error_table.hpp), so that a script can tell a damaged checkpoint from one of another
job or version, and a mistake in a job's declaration from a failure of its run. A Python job's
task that raises one of them fails its run with that class's exit code (UsageError 2, the
checkpoint errors 3); any other exception fails it with 1."""


class Error(Exception):
    """Base of every epochrun error; its message is one line meant for a human."""


class UsageError(Error, ValueError):
    """Invalid input from the user: a blob name that is not a valid name, a dtype or shape a blob
    does not have, an array that is not C-contiguous, a bad option."""


class CheckpointError(Error):
    """A checkpoint cannot be used as asked (no such blob, node or epoch)."""


class CheckpointNotFound(CheckpointError):
    """No committed checkpoint of that epoch (or none at all) in the directory."""


class CorruptCheckpoint(CheckpointError):
    """The file is not what was committed: its message names the file, the blob and the node
    in the words of `epochrun inspect --verify`."""

    def __init__(self, message, file=None, blob=None, node=None):
        super().__init__(message)
        self.file = file
        self.blob = blob
        self.node = node


class CheckpointMismatch(CheckpointError):
    """An intact file that this reader does not read: an integrity header of another version (a
    newer format version is refused as corrupt, as epochrun refuses it)."""
