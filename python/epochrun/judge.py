"""The one judge of a committed checkpoint file, as epochrun's (src/format/checkpoint_judge.cpp):
every path of this package that uses a file -- `epoch(N)`, `latest()`, a file opened alone, the
listing -- asks it before any value is read, so that no path takes a file another refuses
(docs/FORMAT.md, "What every reader checks")."""

from .integrity import check_metadata_hash, read_integrity_header
from .layout import read_layout
from .record import check_matches, layout_from_record


def judge(fd, path, context):
    """(integrity header, Layout) of the file open as `fd`, or CorruptCheckpoint (or
    CheckpointMismatch for an integrity header of another version): the header, the metadata
    hash, then the layout -- from the layout record when the record names the metadata hash just
    verified, otherwise with h5py, a record then checked against what h5py read."""
    header = read_integrity_header(fd, path)
    # Read on every path: it costs the metadata's kilobytes, whatever the data.
    check_metadata_hash(fd, header, path)
    # The writer made the record and the metadata from one description and bound the record to
    # the metadata's hash: metadata that hashes to that value is the metadata the record
    # describes, and reading it with h5py would only confirm the record. A version 1 record
    # names no hash, and one written beside other metadata (changed since, the header sealed
    # again) names another: such a file is read with h5py.
    if header.layout_record and header.record_metadata_xxh64 == header.metadata_xxh64:
        return header, layout_from_record(fd, header, context)
    layout, stored = read_layout(fd, header)
    if stored is not None:
        check_matches(fd, header, layout, stored, context)
    return header, layout
