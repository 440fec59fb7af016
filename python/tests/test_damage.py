"""A damaged file is refused, naming the file, the blob and the node in the words of
`epochrun inspect --verify`, and the package's listing of a damaged directory is epochrun's,
line for line: a byte in a writer block of a global array, in one node's row of a per-node
blob, in the checksum table and in the blob index; a forged layout record and a newer format
version are judged as epochrun judges them."""

import subprocess
import sys

import h5py
import pytest

import epochrun
from conftest import ROOT, epochrun_cli, flip_byte, record_of, reseal, write_record


def listings(directory):
    """epochrun's `inspect --verify` and the package's, each (exit code, text)."""
    cpp = epochrun_cli("inspect", directory, "--verify", check=False)
    python = subprocess.run([sys.executable, "-m", "epochrun", "inspect", str(directory), "--verify"],
                            cwd=ROOT / "python", capture_output=True, text=True, timeout=120)
    return (cpp.returncode, cpp.stdout), (python.returncode, python.stdout)


def found(text, blob):
    """The error `inspect --verify` found in `blob`: what follows "found: BLOB: "."""
    prefix = f"  found: {blob}: "
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def test_a_byte_in_a_writer_block_is_refused_naming_the_array_and_the_block(copy_of):
    directory = copy_of("heat")
    file = directory / "epoch-000005.h5"
    with epochrun.open(directory).epoch(5) as checkpoint:
        block = checkpoint.array_info("field")["blocks"][1]
    with h5py.File(file, "r") as f:
        offset = f["arrays/field"].id.get_offset()
    row = block["start"][0] + 2
    flip_byte(file, offset + (row * 40 + 3) * 8)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with epochrun.open(directory).epoch(5) as checkpoint:
        with pytest.raises(epochrun.CorruptCheckpoint) as error:
            checkpoint.array("field", (slice(row, row + 1), slice(0, 2)))
        assert found(cpp[1], "arrays/field") == [str(error.value)]
        assert "writer block 1 [24:48, 0:40]" in str(error.value) and str(file) in str(error.value)
        assert (error.value.file, error.value.blob) == (str(file), "arrays/field")
        # The other writer's block still reads: the damage is in block 1 only.
        assert checkpoint.array("field", (slice(0, 24),)).shape == (24, 40)


def a_per_node_dataset(file):
    """The name and row bytes of a per-node blob of `file` that has a dataset of its own."""
    with h5py.File(file, "r") as f:
        for name, dataset in f["nodes"].items():
            if dataset.ndim >= 1 and dataset.shape[0] == 3 and dataset.size:
                return name, dataset.id.get_offset(), dataset.nbytes // 3
    pytest.fail(f"{file} has no per-node dataset")


def test_a_byte_in_a_nodes_row_is_refused_naming_the_blob_and_the_node(copy_of):
    directory = copy_of("sum")
    epoch = epochrun.open(directory).epochs[-1]
    file = directory / f"epoch-{epoch:06d}.h5"
    blob, offset, row_bytes = a_per_node_dataset(file)
    flip_byte(file, offset + row_bytes + row_bytes // 2)  # node 1's value
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with epochrun.open(directory).epoch(epoch) as checkpoint:
        node = checkpoint.node_names[1]
        assert checkpoint.blob(blob, node=0) is not None  # node 0's row is intact
        with pytest.raises(epochrun.CorruptCheckpoint) as error:
            checkpoint.blob(blob, node=node)
        assert found(cpp[1], f"{node}/{blob}") == [str(error.value)]
        assert f"dataset /nodes/{blob}, the value of node {node}" in str(error.value)
        assert (error.value.blob, error.value.node) == (blob, node)
        assert [b for b, _ in checkpoint.verify_all()] == [f"{node}/{blob}"]


def test_a_byte_in_a_replicated_blob_is_refused_naming_it(copy_of):
    directory = copy_of("sgd")
    file = directory / "epoch-000003.h5"
    with h5py.File(file, "r") as f:
        offset = f["replicated/weights"].id.get_offset()
    flip_byte(file, offset + 9)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with epochrun.open(directory).epoch(3) as checkpoint:
        with pytest.raises(epochrun.CorruptCheckpoint) as error:
            checkpoint.replicated("weights")
        assert found(cpp[1], "replicated/weights") == [str(error.value)]
        assert (error.value.blob, error.value.node) == ("weights", None)


def test_a_byte_in_the_checksum_table_refuses_the_value_it_covers(copy_of):
    directory = copy_of("heat")
    file = directory / "epoch-000004.h5"
    with h5py.File(file, "r") as f:
        table = f["index/xxh64"]
        offset, rows = table.id.get_offset(), table.shape[0]
    flip_byte(file, offset + 8 * (rows - 1))  # the last writer block of the last array
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with pytest.raises(epochrun.CorruptCheckpoint, match="writer block 1 .*checksum mismatch"):
        epochrun.open(directory).epoch(4).array("field")


def test_a_byte_in_the_blob_index_refuses_the_file_before_h5py_reads_it(copy_of):
    directory = copy_of("sum")
    epoch = epochrun.open(directory).epochs[-1]
    file = directory / f"epoch-{epoch:06d}.h5"
    with h5py.File(file, "r") as f:
        offset = f["index/blobs"].id.get_offset()
    flip_byte(file, offset + 1)  # a name's second character
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with pytest.raises(epochrun.CorruptCheckpoint) as error:
        epochrun.open(directory).epoch(epoch)
    assert str(error.value) == (f"checkpoint {file}: its HDF5 metadata does not match the "
                                "checksum recorded at commit")
    assert f"CORRUPT: {error.value}" in cpp[1]


def test_a_truncated_file_is_refused_as_epochrun_refuses_it(copy_of):
    directory = copy_of("sgd")
    file = directory / "epoch-000002.h5"
    size = file.stat().st_size
    with open(file, "r+b") as f:
        f.truncate(size - 100)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert f"the file has {size - 100} bytes, {size} were committed" in python[1]


def forge_job(record):
    """The record with its job renamed: a forger's edit, which no checksum can tell."""
    at = record.index(b"heat_diffusion")
    return record[:at] + b"H" + record[at + 1 :]


def test_a_forged_record_written_beside_other_metadata_is_refused_as_epochrun_refuses_it(copy_of):
    # A version 2 record that names another metadata hash than the file's is not believed: the
    # file is read with h5py, and the record no longer says what the HDF5 metadata says.
    directory = copy_of("heat")
    file = directory / "epoch-000003.h5"
    version, record = record_of(file)
    assert version == 2
    other = (int.from_bytes(record[:8], "little") ^ 1).to_bytes(8, "little")
    write_record(file, 2, other + forge_job(record[8:]))
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    with pytest.raises(epochrun.CorruptCheckpoint) as error:
        epochrun.open(directory).epoch(3)
    assert str(error.value) == (f"checkpoint {file}: its layout record does not match its HDF5 "
                                "metadata")


def test_a_record_bound_to_the_files_metadata_is_what_every_reader_reads(copy_of, monkeypatch):
    # The record names the metadata hash just verified: both readers take the layout from it,
    # without h5py, and so both believe even a forged job name (only a forger who recomputes the
    # record's checksums can make one; readers of the HDF5 metadata alone see the difference).
    directory = copy_of("heat")
    file = directory / "epoch-000003.h5"
    _, record = record_of(file)
    write_record(file, 2, forge_job(record))
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 0

    def no_hdf5(*_):
        raise AssertionError("h5py read a file whose layout record is bound to its metadata")

    monkeypatch.setattr(epochrun.judge, "read_layout", no_hdf5)
    with epochrun.open(directory).epoch(3) as checkpoint:
        assert checkpoint.job == "Heat_diffusion"
        assert checkpoint.array("field").shape == (48, 40)
    with h5py.File(file, "r") as f:
        assert f.attrs["job"] == "heat_diffusion"


def test_a_version_1_record_is_checked_against_the_hdf5_metadata(copy_of):
    # Version 1 records (written from 26 to 28 November 2026) name no metadata hash: their files
    # are read with h5py, the record checked against it -- intact, then forged.
    directory = copy_of("heat")
    file = directory / "epoch-000003.h5"
    _, record = record_of(file)
    write_record(file, 1, record[8:])
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 0
    with epochrun.open(directory).epoch(3) as checkpoint:
        assert checkpoint.job == "heat_diffusion"
    write_record(file, 1, forge_job(record[8:]))
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert "its layout record does not match its HDF5 metadata" in python[1]


def test_a_version_2_record_too_short_for_its_metadata_hash_is_damage(copy_of):
    directory = copy_of("heat")
    file = directory / "epoch-000003.h5"
    write_record(file, 2, b"\x00" * 7)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert ("integrity header: the layout record is too short for the metadata hash it begins "
            "with") in python[1]


def test_a_newer_format_version_is_corrupt_and_latest_goes_back_past_it(copy_of):
    # A forger's format_version 4, the header sealed again: its record names the metadata of
    # before, so every reader reads the root attributes with HDF5 and refuses the version.
    directory = copy_of("heat")
    file = directory / "epoch-000005.h5"
    with h5py.File(file, "r+") as f:
        f.attrs.modify("format_version", 4)
    reseal(file)
    words = (f"checkpoint {file}: format version 4 is not one this epochrun reads (1 to 3): it "
             "was written by a newer epochrun; load it with that version")
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert f"CORRUPT: {words}" in python[1]
    reader = epochrun.open(directory)
    with pytest.warns(UserWarning, match="skipping corrupt checkpoint of epoch 5"):
        with reader.latest() as checkpoint:
            assert checkpoint.epoch == 4
    assert reader.skipped == [(5, words)]


@pytest.mark.parametrize("attribute, row, value, words", [
    ("epochrun_block_starts", 1, 23, "global array 'field': rank 0's block [0:24, 0:40] and rank "
     "1's block [23:47, 0:40] overlap in [23:24, 0:40]"),
    ("epochrun_block_counts", 1, 23, "global array 'field' of shape [48, 40]: the blocks of the 2 "
     "ranks hold 1880 of its 1920 elements; no rank's block holds [47:48, 0:40] (next to the "
     "blocks of ranks 1)"),
    ("epochrun_block_counts", 1, 25, "global array 'field' of shape [48, 40]: rank 1's block "
     "[24:49, 0:40] reaches outside it"),
])
def test_writer_blocks_that_do_not_tile_the_array_are_refused_in_epochruns_words(
        copy_of, attribute, row, value, words):
    # A forger's writer blocks, the header sealed again: read with HDF5 (the record names the
    # metadata of before), they are refused as epochrun's check_tiling refuses them.
    directory = copy_of("heat")
    file = directory / "epoch-000005.h5"
    with h5py.File(file, "r+") as f:
        table = f["arrays/field"].attrs[attribute]
        table[row, 0] = value
        f["arrays/field"].attrs.modify(attribute, table)
    reseal(file)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert f"CORRUPT: checkpoint {file}: dataset /arrays/field: {words}" in python[1]


@pytest.mark.parametrize("column, value, words", [
    ("kind", 7, "blob 'field' is of no known kind (7)"),
    ("size", 8, "blob 'field' says 8 bytes, its dtype and shape 15360"),
    ("name", b"fi/ld", "invalid blob name 'fi/ld': it contains a path separator"),
])
def test_a_forged_blob_index_row_is_refused_in_epochruns_words(copy_of, column, value, words):
    # A forger's row of /index/blobs, the header sealed again: read with HDF5 (the record names
    # the metadata of before), the row is refused as epochrun's reader refuses it.
    directory = copy_of("heat")
    file = directory / "epoch-000005.h5"
    with h5py.File(file, "r+") as f:
        rows = f["index/blobs"][()]
        rows[column][list(rows["name"]).index(b"field")] = value
        f["index/blobs"][...] = rows
    reseal(file)
    cpp, python = listings(directory)
    assert cpp == python and cpp[0] == 3
    assert f"CORRUPT: checkpoint {file}: blob index /index/blobs: {words}" in python[1]
