"""The XDMF file of global arrays: `epochrun inspect DIR --xdmf` and `epochrun run --xdmf`
describe every committed epoch as a time step pointing into the checkpoint files, which h5py
reads as the package does; ParaView's own Python opens it, its time steps and values are
h5py's, and a frame of heat_diffusion's field renders to a PNG that is not blank."""

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import h5py
import numpy as np
import pytest

import epochrun
from conftest import epochrun_cli


def described(xdmf):
    """{epoch: {array: (file, dataset path, dimensions, number type)}} from the XDMF file."""
    epochs = {}
    for grid in ElementTree.parse(xdmf).getroot().iter("Grid"):
        time = grid.find("Time")
        if time is None:
            continue
        arrays = epochs.setdefault(int(time.get("Value")), {})
        for attribute in grid.iter("Attribute"):
            item = attribute.find("DataItem")
            file, path = item.text.strip().split(":")
            arrays[attribute.get("Name")] = (Path(xdmf).parent / file, path,
                                             tuple(int(n) for n in item.get("Dimensions").split()),
                                             (item.get("NumberType"), item.get("Precision")))
    return epochs


def test_inspect_and_run_describe_every_epoch_pointing_into_its_file(runs, tmp_path):
    out = tmp_path / "elsewhere" / "heat.xmf"
    out.parent.mkdir()
    done = epochrun_cli("inspect", runs["heat"], "--xdmf", out)
    assert done.stdout == f"wrote {out}: 6 epochs, 6 global arrays\n"
    by_inspect = described(out)
    by_run = described(runs["top"] / "heat.xmf")  # kept by both runs, the restart's included
    assert sorted(by_inspect) == sorted(by_run) == [0, 1, 2, 3, 4, 5]
    reader = epochrun.open(runs["heat"])
    for epoch, arrays in by_inspect.items():
        assert by_run[epoch]["field"][1:] == arrays["field"][1:]
        assert by_run[epoch]["field"][0].resolve() == arrays["field"][0].resolve()
        file, path, dimensions, number = arrays["field"]
        assert file.resolve() == (runs["heat"] / f"epoch-{epoch:06d}.h5").resolve()
        assert (path, dimensions, number) == ("/arrays/field", (48, 40), ("Float", "8"))
        with h5py.File(file, "r") as f:
            assert np.array_equal(f[path][...], reader.epoch(epoch).array("field"))


def test_a_damaged_checkpoint_is_left_out_and_named(copy_of, tmp_path):
    directory = copy_of("heat")
    with open(directory / "epoch-000002.h5", "r+b") as f:
        f.truncate(1000)
    done = epochrun_cli("inspect", directory, "--xdmf", tmp_path / "x.xmf", check=False)
    assert done.returncode == 3 and "left out epoch 2: checkpoint" in done.stdout
    assert sorted(described(tmp_path / "x.xmf")) == [0, 1, 3, 4, 5]


def pvbatch():
    """The command that runs ParaView's Python without a display; a skip saying why there is
    none."""
    if not shutil.which("pvbatch"):
        pytest.skip("ParaView's Python (pvbatch, Debian's python3-paraview) is not installed")
    if os.environ.get("DISPLAY"):
        return ["pvbatch"]
    # Debian's ParaView renders through X only (no EGL or OSMesa build): a virtual one.
    if not shutil.which("xvfb-run"):
        pytest.skip("no DISPLAY and no xvfb-run (Debian's xvfb) to render ParaView's frame in")
    return ["xvfb-run", "-a", "pvbatch"]


@pytest.fixture(scope="module")
def paraview(runs, tmp_path_factory):
    """What ParaView read of the run's XDMF file, and the frame it rendered."""
    out = tmp_path_factory.mktemp("paraview")
    script = Path(__file__).with_name("paraview_script.py")
    command = [*pvbatch(), str(script), str(runs["top"] / "heat.xmf"), str(out / "read.json"),
               "field", str(out / "frame.png")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    said = done.stderr + done.stdout
    if done.returncode != 0 and command[0] == "xvfb-run" and (
            "Xvfb" in said or "bad X server connection" in said):
        # xvfb-run -a picks a free display number by looking, and another X server starting
        # meanwhile can take it first ("Xvfb failed to start"); and beside the multihost tests
        # ParaView was once refused by the display xvfb-run had just started ("bad X server
        # connection. DISPLAY=:99", SIGABRT; alone it started): the virtual display,
        # not ParaView, failed, and a second start gets a new one.
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return json.loads((out / "read.json").read_text()), out / "frame.png"


def test_paraview_reads_the_time_steps_and_values_h5py_reads(runs, paraview):
    read, _ = paraview
    assert read["times"] == [0, 1, 2, 3, 4, 5]
    for step in read["steps"]:
        epoch = int(step["time"])
        with h5py.File(runs["heat"] / f"epoch-{epoch:06d}.h5", "r") as f:
            field = f["arrays/field"][...]
        assert step["dimensions"] == [1, 40, 48]  # VTK's x, y, z: the mesh in the y-z plane
        assert np.array_equal(np.array(step["arrays"]["field"]), field.reshape(-1))


def test_a_rendered_frame_of_the_field_is_not_blank(paraview):
    pytest.importorskip("matplotlib", reason="reading the PNG back needs matplotlib")
    import matplotlib.image

    _, frame = paraview
    pixels = matplotlib.image.imread(frame)
    assert pixels.shape[:2] == (240, 320)
    colours = {tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::7]}
    # The background is one colour; the field's colour map gives many more.
    assert len(colours) > 20, f"{frame} has {len(colours)} colours: blank"
