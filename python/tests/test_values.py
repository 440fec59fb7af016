"""Every value the package reads is the value `epochrun inspect --export` writes, for every
epoch of every run: per-node blobs by node, replicated blobs, global arrays whole and in parts
that cross the writer blocks (at 3 ranks and, after the restart, at 2)."""

from pathlib import Path

import numpy as np
import pytest

import epochrun
from conftest import epochrun_cli


def exported(directory, epoch, out):
    epochrun_cli("inspect", directory, "--epoch", epoch, "--export", out)
    return {str(p.relative_to(out).with_suffix("")): np.load(p) for p in Path(out).rglob("*.npy")}


@pytest.mark.parametrize("name", ["heat", "sgd", "sum"])
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
def test_any_numpy_index_reads_what_it_reads_of_the_whole_array(runs, index):
    with epochrun.open(runs["heat"]).epoch(4) as checkpoint:
        whole = checkpoint.array("field")
        assert np.array_equal(checkpoint.array("field", index), whole[index])
        unverified = epochrun.Checkpoint(checkpoint.path, verify=False)
        assert np.array_equal(unverified.array("field", index), whole[index])


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
