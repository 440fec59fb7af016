"""Every value the package reads is the value `epochrun inspect --export` writes, for every
epoch of every run: per-node blobs by node, replicated blobs, global arrays whole and in parts
that cross the writer blocks (at 3 ranks and, after the restart, at 2)."""

import ctypes
import mmap
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import epochrun
import epochrun.file_io
from conftest import epochrun_cli, flip_byte


def exported(directory, epoch, out):
    epochrun_cli("inspect", directory, "--epoch", epoch, "--export", out)
    return {str(p.relative_to(out).with_suffix("")): np.load(p) for p in Path(out).rglob("*.npy")}


@pytest.mark.parametrize("name", ["heat", "heat4", "sgd", "sum"])
def test_every_value_of_every_epoch_is_the_exported_one(runs, tmp_path, name):
    directory = epochrun.open(runs[name])
    assert directory.epochs
    for epoch in directory.epochs:
        expected = exported(runs[name], epoch, tmp_path / f"export-{epoch}")
        with directory.epoch(epoch) as checkpoint:
            read = {}
            for node in checkpoint.node_names:
                for blob, value in checkpoint.blobs(node).items():
                    read[f"{node}/{blob}"] = value
                    assert np.array_equal(checkpoint.blob(blob, node=node), value)
            for blob in checkpoint.replicated_names:
                read[f"replicated/{blob}"] = checkpoint.replicated(blob)
            for array in checkpoint.array_names:
                read[f"arrays/{array}"] = checkpoint.array(array)
        assert sorted(read) == sorted(expected)
        for key, value in expected.items():
            assert read[key].dtype == value.dtype and read[key].shape == value.shape, key
            assert np.array_equal(read[key], value), f"epoch {epoch} {key}"


def test_the_heat_field_is_read_at_3_ranks_and_after_the_restart_at_2(runs):
    directory = epochrun.open(runs["heat"])
    assert directory.epochs == [0, 1, 2, 3, 4, 5]
    assert [r["ranks"] for r in directory.runs] == [3, 2]
    for epoch, writers in ((3, 3), (5, 2)):
        with directory.epoch(epoch) as checkpoint:
            assert (checkpoint.job, checkpoint.epoch, checkpoint.ranks) == ("heat_diffusion", epoch, writers)
            assert checkpoint.config["heat_diffusion.rows"] == 48
            info = checkpoint.array_info("field")
            assert (info["dtype"], info["shape"], len(info["blocks"])) == ("f64", (48, 40), writers)


INDEXES = [
    np.s_[10:30, 3:37],  # across writer blocks
    np.s_[-1],
    np.s_[..., 7],
    np.s_[::-3, 1:40:4],
    np.s_[[0, 17, 47], 5:],
    np.s_[None, 20, ...],
    np.s_[5, [1, 2, 3]],
    np.s_[np.arange(48) % 5 == 0, :],
    np.s_[40:5:-2, ::7],
]


@pytest.mark.parametrize("index", INDEXES, ids=range(len(INDEXES)))
@pytest.mark.parametrize("name", ["heat", "heat4"])
def test_any_numpy_index_reads_what_h5py_reads_of_the_whole_array(runs, name, index):
    directory = epochrun.open(runs[name])
    with directory.epoch(directory.epochs[-1]) as checkpoint:
        with h5py.File(checkpoint.path, "r") as f:
            whole = f["arrays/field"][...]
        assert np.array_equal(checkpoint.array("field", index), whole[index])
        unverified = epochrun.Checkpoint(checkpoint.path, verify=False)
        assert np.array_equal(unverified.array("field", index), whole[index])


@pytest.mark.parametrize("name", ["heat", "heat4"])
def test_read_in_pieces_each_block_is_hashed_as_it_arrives(runs, copy_of, monkeypatch, name):
    # Values of more than a piece (8 MiB) are read on a second thread and hashed piece by piece:
    # pieces of 1000 bytes take that path here, bands and 2 x 2 blocks alike; and a verification
    # that keeps no bytes reads bands of 3 rows (960 bytes) through its buffer of 1000.
    monkeypatch.setattr(epochrun.file_io, "PIECE", 1000)
    monkeypatch.setattr(epochrun.file_io, "VERIFY_PIECE", 1000)
    directory = epochrun.open(runs[name])
    with directory.epoch(directory.epochs[-1]) as checkpoint:
        with h5py.File(checkpoint.path, "r") as f:
            whole = f["arrays/field"][...]
        assert np.array_equal(checkpoint.array("field"), whole)
        assert np.array_equal(checkpoint.array("field", np.s_[7:41, 3:33]), whole[7:41, 3:33])
        assert checkpoint.verify_all() == []
    damaged = copy_of(name)
    file = damaged / f"epoch-{directory.epochs[-1]:06d}.h5"
    with h5py.File(file, "r") as f:
        offset = f["arrays/field"].id.get_offset()
    flip_byte(file, offset + (47 * 40 + 39) * 8)  # the last cell: the last writer's block
    with epochrun.open(damaged).epoch(directory.epochs[-1]) as checkpoint:
        with pytest.raises(epochrun.CorruptCheckpoint, match=r"writer block \d \[24:48, ") as error:
            checkpoint.array("field")
        # The verification that keeps no bytes refuses it in the read's words.
        assert [(blob, str(e)) for blob, e in checkpoint.verify_all()] == [
            ("arrays/field", str(error.value))]


def memory_of(array):
    """The object that holds an array's memory, past the views between."""
    while isinstance(array, (np.ndarray, memoryview)):
        array = array.base if isinstance(array, np.ndarray) else array.obj
    return array


def test_a_large_array_is_a_private_mapping_of_the_file(copy_of, monkeypatch):
    # From 1 MiB on (here from 1 byte), the array returned maps the file: copy-on-write, so a
    # write changes the array and never the checkpoint, and it outlives the file's descriptor and
    # name. Where the file cannot be mapped it is read into memory of its own: the same values.
    directory = copy_of("heat")
    file = directory / f"epoch-{epochrun.open(directory).epochs[-1]:06d}.h5"
    committed = file.read_bytes()
    with epochrun.open(file) as checkpoint:
        small = checkpoint.array("field")
        monkeypatch.setattr(epochrun.file_io, "_MAPPED_FROM", 1)
        monkeypatch.setattr(epochrun.file_io, "PIECE", 4096)  # pieces that cut the blocks
        mapped = checkpoint.array("field")
        part = checkpoint.array("field", np.s_[3:40, 5])
        monkeypatch.setattr(epochrun.file_io, "map_array", lambda *arguments: None)
        read = checkpoint.array("field")
    assert small.flags.owndata and not mapped.flags.owndata and not read.flags.owndata
    assert isinstance(memory_of(mapped), ctypes.Array) and isinstance(memory_of(read), mmap.mmap)
    assert np.array_equal(small, mapped) and np.array_equal(small, read)
    assert np.array_equal(part, small[3:40, 5])
    assert mapped.flags.writeable and mapped.flags.c_contiguous
    file.unlink()
    mapped[...] = -1.0
    assert (mapped == -1.0).all() and not np.array_equal(small, mapped)
    file.write_bytes(committed)
    with epochrun.open(file) as checkpoint:
        assert np.array_equal(checkpoint.array("field"), small)


def test_a_file_cut_short_after_it_was_judged_is_refused_not_faulted(copy_of, monkeypatch):
    # A mapping past a file's end faults (SIGBUS, the reader's process killed) where a read
    # reports a short file: the mapping is refused first, in the read's words.
    monkeypatch.setattr(epochrun.file_io, "_MAPPED_FROM", 1)
    directory = copy_of("heat")
    file = directory / f"epoch-{epochrun.open(directory).epochs[-1]:06d}.h5"
    with epochrun.open(file) as checkpoint:
        with h5py.File(file, "r") as f:
            offset = f["arrays/field"].id.get_offset()
        os.truncate(file, offset + 100)
        with pytest.raises(epochrun.CorruptCheckpoint, match=r"dataset .*field.*: short read at byte"):
            checkpoint.array("field")


def test_a_name_the_file_lacks_is_a_checkpoint_error(runs):
    with epochrun.open(runs["sgd"]).latest() as checkpoint:
        for read in (lambda: checkpoint.array("field"), lambda: checkpoint.replicated("nope"),
                     lambda: checkpoint.blob("nope", node=0), lambda: checkpoint.blobs("nobody")):
            with pytest.raises(epochrun.CheckpointError):
                read()
    with pytest.raises(epochrun.CheckpointNotFound, match="committed epochs: 0, 1, 2, 3"):
        epochrun.open(runs["sgd"]).epoch(99)


def test_a_version_1_file_reads_as_its_export(tmp_path):
    v1 = Path(__file__).resolve().parents[2] / "tests" / "data" / "v1_sgd_regression_3_ranks_epoch_4.h5"
    epochrun_cli("inspect", v1, "--export", tmp_path / "out")
    with epochrun.open(v1) as checkpoint:
        assert checkpoint.format_version == 1
        for npy in (tmp_path / "out").rglob("*.npy"):
            node, blob = npy.parent.name, npy.stem
            assert np.array_equal(checkpoint.blob(blob, node=node), np.load(npy)), npy
