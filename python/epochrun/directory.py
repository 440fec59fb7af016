"""A checkpoint directory as a run leaves it (docs/FORMAT.md): one file per committed epoch,
the run history (runs.jsonl) and the per-rank metrics (metrics.jsonl)."""

import os
import re
import stat
import warnings

from .checkpoint import Checkpoint
from .errors import CheckpointNotFound, CorruptCheckpoint
from .records import read_jsonl, to_frame

# Only the canonical spelling counts (src/checkpoint/directory/checkpoint_directory.cpp): six digits at
# least, zero-padded, no more digits than the epoch needs.
_FILE_NAME = re.compile(r"epoch-(\d{6,18})\.h5")


def checkpoint_file_name(epoch):
    return f"epoch-{epoch:06d}.h5"


def parse_checkpoint_file_name(name):
    match = _FILE_NAME.fullmatch(name)
    if not match:
        return None
    epoch = int(match.group(1))
    return epoch if checkpoint_file_name(epoch) == name else None


class CheckpointDirectory:
    """The committed checkpoints of a directory and its run records. `verify` (default True)
    is what every checkpoint it opens does with the values it reads."""

    def __init__(self, path, verify=True):
        self.path = os.fspath(path)
        self.verify = verify
        if not os.path.isdir(self.path):
            raise CheckpointNotFound(f"{self.path} is not a checkpoint directory")
        # The epochs latest() skipped as damaged: (epoch, the error's message), newest first.
        self.skipped = []

    def __repr__(self):
        return f"<epochrun.CheckpointDirectory {self.path}: epochs {self.epochs}>"

    @property
    def epochs(self):
        """The committed epochs, ascending: regular files under a checkpoint's exact name
        (a symlink or a temporary file is never one)."""
        epochs = []
        with os.scandir(self.path) as entries:
            for entry in entries:
                epoch = parse_checkpoint_file_name(entry.name)
                if epoch is not None and stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    epochs.append(epoch)
        return sorted(epochs)

    def file_for(self, epoch):
        return os.path.join(self.path, checkpoint_file_name(epoch))

    def epoch(self, epoch):
        """The checkpoint of `epoch`, its header and layout checked (CorruptCheckpoint when
        they are damaged), its values verified as they are read."""
        if epoch not in self.epochs:
            epochs = self.epochs
            raise CheckpointNotFound(
                f"no committed checkpoint for epoch {epoch} in {self.path}"
                + (" (it holds none)" if not epochs else
                   " (committed epochs: " + ", ".join(str(e) for e in epochs) + ")")
            )
        return Checkpoint(self.file_for(epoch), verify=self.verify, expected_epoch=epoch)

    def latest(self):
        """The newest checkpoint that verifies, as `--resume-from-epoch latest` chooses it:
        newest first, an epoch that is damaged is skipped with the runner's warning, "skipping
        corrupt checkpoint of epoch N: " and the error (kept in `skipped`), one of another
        integrity header version is an error. Each is
        judged as every reader judges it (`epoch(N)` and `epochrun inspect` alike), then every
        value's checksum read: an epoch whose HDF5 metadata alone is damaged is skipped, as the
        runner skips it. With verify=False, the newest the judge lets through, its values
        unread."""
        self.skipped = []
        for epoch in reversed(self.epochs):
            try:
                checkpoint = Checkpoint(self.file_for(epoch), verify=self.verify,
                                        expected_epoch=epoch)
                problems = checkpoint.verify_all() if self.verify else []
                if problems:
                    checkpoint.close()
                    raise problems[0][1]
                return checkpoint
            except CorruptCheckpoint as error:
                self.skipped.append((epoch, str(error)))
                warnings.warn(f"skipping corrupt checkpoint of epoch {epoch}: {error}", stacklevel=2)
            except FileNotFoundError:
                continue  # deleted since it was listed (retention of a running job)
        raise CheckpointNotFound(
            f"no valid checkpoint in {self.path}"
            if self.skipped else f"no committed checkpoint in {self.path}"
        )

    @property
    def runs(self):
        """The run history, one record (a dict) per run, oldest first; lines that do not
        parse are skipped, as epochrun skips them."""
        return read_jsonl(os.path.join(self.path, "runs.jsonl"))

    @property
    def metrics(self):
        """The run's per-epoch, per-load and per-save figures of every rank (metrics.jsonl), one
        record per line."""
        return read_jsonl(os.path.join(self.path, "metrics.jsonl"))

    def runs_frame(self):
        """The run history as a pandas DataFrame (pandas must be installed)."""
        return to_frame(self.runs)

    def metrics_frame(self):
        """The metrics as a pandas DataFrame, one row per event and rank."""
        return to_frame(self.metrics, per_rank=True)


def open(path, verify=True):  # noqa: A001 -- the package's entry point, as h5py.File
    """The checkpoint directory at `path` (or, for a file, that one checkpoint)."""
    if os.path.isfile(os.fspath(path)):
        return Checkpoint(path, verify=verify)
    return CheckpointDirectory(path, verify=verify)
