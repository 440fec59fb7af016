"""`python -m epochrun inspect DIR|FILE [--verify]`: the listing `epochrun inspect` prints
(src/cli/inspect/inspect_listing.cpp), line for line, from this package's own reading."""

import json
import os
import sys

from .checkpoint import Checkpoint
from .directory import CheckpointDirectory
from .errors import CheckpointError, CheckpointNotFound

# What opening a file checks before any value is read, in epochrun's words.
OPEN_CHECKS = (
    "integrity header (its checksum, the file size, the metadata hash), every dataset's layout"
)


def _describe(path, epoch, verify):
    """The entry of one checkpoint: what the listing says of it; None when it is gone."""
    entry = {"epoch": epoch, "file": os.path.basename(path) if epoch is not None else path}
    try:
        with Checkpoint(path, expected_epoch=epoch) as checkpoint:
            entry["bytes"] = checkpoint.file_bytes
            entry["epoch"] = checkpoint.epoch
            per_node = checkpoint.per_node_count()
            entry.update(
                job=checkpoint.job, ranks=checkpoint.ranks, format=checkpoint.format_version,
                blobs=per_node + len(checkpoint.replicated_names) + len(checkpoint.array_names),
                blob_bytes=checkpoint.blob_bytes, per_node=per_node,
                replicated=len(checkpoint.replicated_names), arrays=len(checkpoint.array_names),
                valid=True,
            )
            if verify:
                entry["verified"] = checkpoint.verification()
                problems = entry["verified"]["problems"]
                if problems:
                    entry["valid"] = False
                    more = f" (and {len(problems) - 1} more blobs)" if len(problems) > 1 else ""
                    entry["error"] = f"{problems[0][0]}: {problems[0][1]}{more}"
    except FileNotFoundError:
        if epoch is not None:
            return None  # deleted since it was listed
        raise
    except CheckpointError as error:
        if "bytes" not in entry:
            try:
                entry["bytes"] = os.lstat(path).st_size
            except FileNotFoundError:
                return None
        entry["valid"] = False
        entry["error"] = str(error)
    return entry


def _lines(entry, verify):
    epoch = "?" if entry["epoch"] is None else entry["epoch"]
    line = f"epoch {epoch}  {entry['file']}  {entry['bytes']} bytes"
    if "job" in entry:
        line += (f"  job {entry['job']}  {entry['ranks']} ranks  {entry['blobs']} blobs  "
                 f"{entry['blob_bytes']} blob bytes  format {entry['format']}")
        if entry["format"] >= 3:
            line += (f" ({entry['per_node']} per-node, {entry['replicated']} replicated, "
                     f"{entry['arrays']} global arrays)")
    if entry["valid"]:
        line += "  OK" if verify else ""
    else:
        line += f"  CORRUPT: {entry['error']}"
    lines = [line]
    if verify and "verified" not in entry:
        lines += [f"  checked: {OPEN_CHECKS}", f"  found: {entry['error']} (no blob read)"]
    elif verify:
        verified = entry["verified"]
        lines.append(f"  checked: {OPEN_CHECKS}; {verified['checked']} blobs' xxh64 "
                     f"({verified['bytes_read']} bytes read)")
        if not verified["problems"]:
            lines.append("  found: nothing wrong")
        lines += [f"  found: {blob}: {error}" for blob, error in verified["problems"]]
    return lines


def _field(record, key):
    """A run record's field as the listing prints it: null or missing "-", strings bare."""
    value = record.get(key)
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def _history_lines(records):
    lines = [f"run history: {len(records)} run(s)"]
    for r in records:
        f = lambda key, r=r: _field(r, key)  # noqa: E731
        lines.append(
            f"  {f('started_at')} .. {f('ended_at')}  {f('host')}  {f('ranks')} ranks  slurm job "
            f"{f('slurm_job_id')} restart {f('restart_count')}  resumed from {f('resumed_from')}  "
            f"{f('epochs_run')} epoch(s)  last committed {f('last_committed_epoch')}  exit "
            f"{f('exit_code')}  {f('stop_kind')}: {f('stop_reason')}"
        )
    return lines


def listing(path, verify=False):
    """The listing's lines, and whether every checkpoint in it is valid."""
    path = os.fspath(path)
    if os.path.isfile(path):
        entries = [_describe(path, None, verify)]
        lines = []
    else:
        directory = CheckpointDirectory(path)
        entries = [e for e in (_describe(directory.file_for(epoch), epoch, verify)
                               for epoch in directory.epochs) if e is not None]
        lines = [f"committed checkpoints in {path}: {len(entries)}"]
    for entry in entries:
        lines += _lines(entry, verify)
    if not os.path.isfile(path):
        lines += _history_lines(directory.runs)
    return lines, all(entry["valid"] for entry in entries)


def main(arguments):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m epochrun inspect",
        description="the committed checkpoints of a directory, or one file, as `epochrun "
        "inspect` lists them",
    )
    parser.add_argument("path", help="checkpoint directory or file")
    parser.add_argument("--verify", action="store_true",
                        help="read every blob back and check its checksum; exit 3 when a "
                        "checkpoint is damaged")
    options = parser.parse_args(arguments)
    if not os.path.exists(options.path):
        print(f"epochrun: error: '{options.path}' is not a directory or a checkpoint file "
              "(No such file or directory)", file=sys.stderr)
        return 2
    try:
        lines, valid = listing(options.path, options.verify)
    except CheckpointNotFound as error:
        print(f"epochrun: error: {error}", file=sys.stderr)
        return 3
    print("\n".join(lines))
    return 0 if valid else 3
