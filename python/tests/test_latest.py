"""latest() chooses what `--resume-from-epoch latest` chooses on the same damaged directory:
the newest epoch that verifies, the damaged newer ones skipped (and named) -- an epoch whose HDF5
metadata alone is damaged included, in the words of the runner and of `epochrun inspect`."""

import warnings

import h5py
import pytest

import epochrun
from conftest import HEAT, epochrun_cli, flip_byte, run_job, summary


def damage_field(file, row):
    with h5py.File(file, "r") as f:
        offset = f["arrays/field"].id.get_offset()
    flip_byte(file, offset + row * 40 * 8 + 5)


def test_latest_skips_what_the_runner_skips_and_takes_what_it_resumes_from(copy_of, tmp_path):
    directory = copy_of("heat")
    damage_field(directory / "epoch-000005.h5", 30)  # written on 2 ranks: block 1
    damage_field(directory / "epoch-000004.h5", 1)  # block 0
    reader = epochrun.open(directory)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with reader.latest() as checkpoint:
            chosen = checkpoint.epoch
    skipped = [epoch for epoch, _ in reader.skipped]
    assert (chosen, skipped) == (3, [5, 4])
    assert [str(w.message).split(":")[0] for w in warned] == [
        "skipping corrupt checkpoint of epoch 5", "skipping corrupt checkpoint of epoch 4"]
    assert "dataset /arrays/field, writer block 1" in reader.skipped[0][1]

    run_job(3, [*HEAT, "--checkpoint-dir", str(directory), "--resume-from-epoch", "latest",
                "--num-epochs", "4", "--summary-json", str(tmp_path / "summary.json")], tmp_path)
    ran = summary(tmp_path / "summary.json")
    assert ran["resumed_from"] == chosen
    # Epochs only: a damaged value is found by the ranks that load it, in the words of each
    # reader's own read (inspect's and this package's say which block, the runner's which rank).
    assert [s["epoch"] for s in ran["skipped_corrupt_checkpoints"]] == skipped


def test_without_verification_latest_is_the_newest_file_that_opens(copy_of):
    directory = copy_of("heat")
    damage_field(directory / "epoch-000005.h5", 30)
    with epochrun.open(directory, verify=False).latest() as checkpoint:
        assert checkpoint.epoch == 5


def test_a_directory_of_only_damaged_checkpoints_has_no_latest(copy_of):
    directory = copy_of("sgd")
    for file in directory.glob("epoch-*.h5"):
        with open(file, "r+b") as f:
            f.truncate(file.stat().st_size - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(epochrun.CheckpointNotFound, match="no valid checkpoint"):
            epochrun.open(directory).latest()


def test_an_epoch_whose_hdf5_metadata_alone_is_damaged_is_skipped_as_the_runner_skips_it(
        copy_of, tmp_path):
    # Every reader verifies the metadata hash before it believes the layout record, a resume's
    # included: a byte of the blob index damaged refuses the epoch on every path, in one wording.
    directory = copy_of("heat")
    file = directory / "epoch-000005.h5"
    with h5py.File(file, "r") as f:
        offset = f["index/blobs"].id.get_offset()
    flip_byte(file, offset + 1)
    words = f"checkpoint {file}: its HDF5 metadata does not match the checksum recorded at commit"
    reader = epochrun.open(directory)
    with pytest.raises(epochrun.CorruptCheckpoint) as error:
        reader.epoch(5)
    assert str(error.value) == words
    with pytest.warns(UserWarning) as warned:
        with reader.latest() as checkpoint:
            assert checkpoint.epoch == 4
    assert [str(w.message) for w in warned] == [f"skipping corrupt checkpoint of epoch 5: {words}"]
    assert reader.skipped == [(5, words)]
    inspected = epochrun_cli("inspect", directory, "--verify", check=False)
    assert inspected.returncode == 3 and f"CORRUPT: {words}" in inspected.stdout

    run_job(2, [*HEAT, "--checkpoint-dir", str(directory), "--resume-from-epoch", "latest",
                "--num-epochs", "6", "--summary-json", str(tmp_path / "summary.json")], tmp_path)
    ran = summary(tmp_path / "summary.json")
    # The judge's words, after the runner's own context.
    assert (ran["resumed_from"], ran["skipped_corrupt_checkpoints"]) == (
        4, [{"epoch": 5, "error": f"load epoch 5: {words}"}])
