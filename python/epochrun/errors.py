"""The errors a reader raises: the classes of epochrun's own table (src/base/error_table.hpp),
so that a script can tell a damaged checkpoint from one of another job or version."""


class CheckpointError(Exception):
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
