"""The README's Python job (examples/python/running_mean.py) as tests/readme_job_test.cpp holds
the C++ one: the README's block is that file, under forty lines, and the job runs on 3 ranks,
checkpoints, and resumes bit-identically to an uninterrupted run."""

import re

from conftest import ROOT, latest, run_ok

EXAMPLE = ROOT / "examples" / "python" / "running_mean.py"


def readme_block(first_line):
    text = (ROOT / "README.md").read_text()
    found = re.search(r"```python\n(" + re.escape(first_line) + r".*?)```\n", text, re.S)
    return found.group(1) if found else ""


def test_the_readme_shows_the_example_file_under_forty_lines():
    example = EXAMPLE.read_text()
    assert readme_block(example.splitlines(keepends=True)[0]) == example, \
        "README.md's Python job differs from examples/python/running_mean.py"
    assert example.count("\n") < 40


def totals(directory):
    checkpoint = latest(directory)
    return checkpoint.epoch, [checkpoint.blob("totals", node=rank).tobytes() for rank in range(3)]


def test_it_runs_checkpoints_and_resumes_bit_identically(tmp_path):
    whole = run_ok(3, EXAMPLE, ["--checkpoint-dir", "whole", "--log-level", "warn"], tmp_path)
    assert "mean of 15000 numbers: 0.49" in whole.stdout
    expected = totals(tmp_path / "whole")
    assert expected[0] == 5
    # Interrupted after two epochs (as --num-epochs 2 stops a run), then resumed.
    run_ok(3, EXAMPLE, ["--checkpoint-dir", "resumed", "--num-epochs", "2", "--log-level", "warn"],
           tmp_path)
    assert totals(tmp_path / "resumed")[0] == 2
    run_ok(3, EXAMPLE, ["--checkpoint-dir", "resumed", "--resume-from-epoch", "latest",
                        "--log-level", "warn"], tmp_path)
    assert totals(tmp_path / "resumed") == expected
