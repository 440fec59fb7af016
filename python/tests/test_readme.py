"""python/README.md's example works as written, from the source tree and from the package
installed with `pip install ./python` in a fresh virtual environment (with the system's
packages for h5py, numpy and xxhash), offline."""

import os
import re
import shutil
import subprocess
import sys
import venv

import pytest

from conftest import ROOT


def example():
    text = (ROOT / "python" / "README.md").read_text()
    return re.search(r"```python example\n(.*?)```", text, re.S).group(1)


def run_example(python, cwd, environment):
    (cwd / "example.py").write_text(example())
    done = subprocess.run([str(python), "example.py"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**environment, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr
    assert (cwd / "field.png").stat().st_size > 1000


def test_the_example_is_five_lines_and_the_top_readme_shows_it_too():
    assert len(example().strip().splitlines()) == 5
    assert example() in (ROOT / "README.md").read_text()


def test_the_example_runs_from_the_source_tree(runs, tmp_path):
    pytest.importorskip("matplotlib", reason="the example plots with matplotlib")
    (tmp_path / "checkpoints").symlink_to(runs["heat"])
    environment = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    run_example(sys.executable, tmp_path, environment)


def test_pip_installs_the_package_offline_and_the_example_runs(runs, tmp_path):
    pytest.importorskip("matplotlib", reason="the example plots with matplotlib")
    venv.create(tmp_path / "env", system_site_packages=True, with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # From a copy: setuptools builds in the source directory, which stays as it is.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "python", source, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    # No index, no build isolation: nothing is fetched; setuptools is the environment's.
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                           "--no-cache-dir", "--quiet", str(source)],
                          capture_output=True, text=True, timeout=180, env=environment)
    assert done.returncode == 0, done.stdout + done.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "checkpoints").symlink_to(runs["heat"])
    where = subprocess.run([str(python), "-c", "import epochrun; print(epochrun.__file__)"],
                           cwd=work, capture_output=True, text=True, timeout=60, env=environment)
    assert str(tmp_path / "env") in where.stdout
    run_example(python, work, environment)
