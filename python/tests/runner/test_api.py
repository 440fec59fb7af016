"""The Python job API against the real runner on 3 ranks: declarations refused in one line,
blobs as numpy arrays over the workspace's own memory (the same memory in every task, after a
resume, and in the run's result), assignments and collectives refused in one line when the
array is not one a blob or a collective takes, the collectives' results (and mpi4py's, on the
same communicator), and the GIL released while the runner saves and while a rank waits in a
collective."""

import json

import numpy as np
import pytest

from conftest import JOBS, require_bindings, run_ok

CHECKS = JOBS / "checks_job.py"


def records(directory, ranks=3):
    return [json.loads((directory / f"record-{rank}.json").read_text()) for rank in range(ranks)]


def one_line_usage_error(raised):
    error = raised.value
    import epochrun
    assert isinstance(error, epochrun.UsageError) and isinstance(error, epochrun.Error)
    assert "\n" not in str(error) and str(error)
    return str(error)


def test_declarations_are_refused_in_one_line():
    require_bindings()
    import epochrun
    job = epochrun.Job("declarations")
    with pytest.raises(epochrun.UsageError) as raised:
        job.blob("a/b", np.float64, (3,))
    assert one_line_usage_error(raised) == "invalid blob name 'a/b': it contains a path separator"
    for name in ("", "..", "x" * 256, "tab\there"):
        with pytest.raises(epochrun.UsageError) as raised:
            job.blob(name, np.float64, (3,))
        assert "blob name" in one_line_usage_error(raised)
    with pytest.raises(epochrun.UsageError) as raised:
        epochrun.Job("no/job")
    assert "job name" in one_line_usage_error(raised)
    with pytest.raises(epochrun.UsageError) as raised:
        job.blob("w", np.float16, (3,))
    assert one_line_usage_error(raised) == (
        "blob 'w': dtype float16 is not one epochrun holds (float32, float64, int32, int64, uint8)")
    with pytest.raises(epochrun.UsageError) as raised:
        job.replicated("w", "complex128", (3,))
    assert "dtype complex128" in one_line_usage_error(raised)
    for shape in ((-1,), (2.5,), "abc"):
        with pytest.raises(epochrun.UsageError) as raised:
            job.blob("w", np.float64, shape)
        assert "is not a tuple of sizes" in one_line_usage_error(raised)
    with pytest.raises(epochrun.UsageError) as raised:
        job.global_array("g", np.float64, ())
    assert "needs at least one dimension" in one_line_usage_error(raised)
    with pytest.raises(epochrun.UsageError) as raised:
        job.scalar("s", np.int64, 2.5)
    assert "initial value 2.5" in one_line_usage_error(raised)
    job.blob("w", np.float64, (3,))
    with pytest.raises(epochrun.UsageError) as raised:
        job.blob("w", np.float64, (3,))
    assert one_line_usage_error(raised) == "blob 'w' is declared twice"
    with pytest.raises(epochrun.UsageError) as raised:
        job.blob("o", np.float64, (2,), on_rank_change="keep")
    assert "on_rank_change" in one_line_usage_error(raised)
    with pytest.raises(epochrun.UsageError) as raised:
        job.option("bad key/", 1)
    assert "job option key" in one_line_usage_error(raised)


def test_wrong_dtype_shape_name_and_noncontiguous_arrays_are_one_line_usage_errors(tmp_path):
    run_ok(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "errors", "--log-level",
                       "warn"], tmp_path)
    for record in records(tmp_path):
        seen = {event["case"]: event for event in record["events"]}
        for case, event in seen.items():
            if case == "accepted":
                continue
            assert event["cls"] == "UsageError" and event["is_value_error"], event
            assert "\n" not in event["message"]
        assert seen["dtype"]["message"] == (
            "blob 'weights' holds float64 of shape (4,); the value assigned is float32 of shape "
            "(4,) (convert it with .astype(numpy.float64))")
        assert seen["shape"]["message"] == (
            "blob 'weights' holds float64 of shape (4,); the value assigned is float64 of shape "
            "(5,)")
        assert seen["noncontiguous"]["message"].startswith(
            "blob 'weights': the array assigned is not C-contiguous")
        assert "2.5" in seen["python_value"]["message"]
        assert seen["missing"]["message"] == "workspace has no blob 'no_such_blob'"
        assert seen["allreduce_noncontiguous"]["message"].startswith(
            "allreduce: the array is not C-contiguous")
        assert "dtype float16" in seen["allreduce_dtype"]["message"]
        assert "'product'" in seen["allreduce_op"]["message"]
        assert "download and exit groups" in seen["gathered_outside_download"]["message"]
        assert seen["not_a_global_array"]["message"] == "blob 'weights' is not a global array"
        assert seen["accepted"] == {"case": "accepted", "weights": [0, 1, 2, 3], "counter": 3}


def memory_events(record):
    return [event for event in record["events"] if "blob" in event]


def check_one_memory(record, tasks):
    """Every view of a blob in this run is its workspace memory, at one address, shared from
    task to task; the run's result is that memory too."""
    events = memory_events(record)
    assert {event["task"] for event in events} == tasks
    by_blob = {}
    for event in events:
        assert event["address"] == event["workspace"], event
        assert event["writeable"], event
        by_blob.setdefault(event["blob"], []).append(event)
    for blob, seen in by_blob.items():
        assert len({event["address"] for event in seen}) == 1, blob
        assert all(event["shares_with_before"] for event in seen[1:]), blob
        assert record["after_run"][blob]["address"] == seen[0]["address"], blob
        assert record["after_run"][blob]["shares_with_last_task"], blob
    return by_blob


def test_blobs_are_numpy_views_of_the_workspace_in_every_task_and_after_a_resume(tmp_path):
    run_ok(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "memory", "--num-epochs", "2",
                       "--log-level", "warn"], tmp_path)
    for rank, record in enumerate(records(tmp_path)):
        by_blob = check_one_memory(record, {"init", "first", "second"})
        first = by_blob["field"][0]
        assert first["shape"] == [2, 5] and first["dtype"] == "float64"  # rank's block of (6, 5)
        assert by_blob["opaque"][0]["dtype"] == "uint8"
        assert by_blob["counter"][0]["shape"] == []
    # Resumed: the load wrote into the workspace the tasks then saw, without a copy between.
    run_ok(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "memory",
                       "--resume-from-epoch", "latest", "--log-level", "warn"], tmp_path)
    for record in records(tmp_path):
        assert record["summary"]["resumed_from"] == 2
        check_one_memory(record, {"first", "second"})
    from conftest import latest
    checkpoint = latest(tmp_path / "ck")
    assert checkpoint.epoch == 4
    for rank in range(3):
        # Two in-place additions per epoch, each saved from the blob's own memory.
        assert checkpoint.blob("weights", node=rank).tolist() == [9.0] * 4
        assert int(checkpoint.blob("counter", node=rank)) == 5 + 1 + 8


def test_collectives_over_numpy_arrays_and_through_mpi4py(tmp_path):
    run_ok(3, CHECKS, ["--checkpoint-dir", "ck", "--py_checks.mode", "collectives",
                       "--num-epochs", "1", "--log-level", "warn"], tmp_path)
    for rank, record in enumerate(records(tmp_path)):
        seen = record["collectives"]
        assert (seen["rank"], seen["size"]) == (rank, 3)
        assert (seen["ctx_rank"], seen["ctx_size"]) == (rank, 3)
        for dtype in ("float32", "float64", "int32", "int64", "uint8"):
            # [rank + 1, 10 - rank, 2] over ranks 0, 1, 2.
            assert seen[f"allreduce_sum_{dtype}"] == [6, 27, 6]
            assert seen[f"allreduce_max_{dtype}"] == [3, 10, 2]
            assert seen[f"allreduce_min_{dtype}"] == [1, 8, 2]
            for op in ("sum", "max", "min"):
                assert seen[f"allreduce_in_place_{op}_{dtype}"]
        assert seen["allreduce_int"] == 6 and seen["allreduce_float_max"] == 1.0
        assert seen["allreduce_list"] == [0, 1]
        assert seen["broadcast"] == [7.0] * 3
        assert seen["allgather"] == [[0], [0, 1], [0, 1, 2]]
        assert seen["gather"] == ([[0.0], [2.0], [4.0]] if rank == 0 else [])
        left = (rank - 1) % 3
        assert seen["sendrecv"] == [left, left * 10.0]
        assert (seen["mpi4py_rank"], seen["mpi4py_size"]) == (rank, 3)
        assert seen["mpi4py_allreduce"] == 6 and seen["mpi4py_Allreduce"] == [3.0]


@pytest.mark.parametrize("given", ["world", "mpi4py"])
def test_the_gil_is_released_while_the_runner_saves_and_a_rank_waits(tmp_path, given):
    """A Python thread beside the job runs while the runner saves 32 MiB a rank (between two
    tasks) and while ranks 1 and 2 wait in an allreduce for rank 0, which comes 0.3 s late: a
    runner or collective holding the GIL would give it no turn at all."""
    arguments = ["--checkpoint-dir", "ck", "--py_checks.mode", "gil", "--py_checks.state_mib",
                 "32", "--log-level", "warn"]
    if given == "mpi4py":
        arguments += ["--py_checks.mpi4py", "true"]  # epochrun.run(job, comm=MPI.COMM_WORLD)
    run_ok(3, CHECKS, arguments, tmp_path)
    for rank, record in enumerate(records(tmp_path)):
        saves = [e["ticks"] for e in record["events"] if e["window"] == "save"]
        waits = [e["ticks"] for e in record["events"] if e["window"] == "collective"]
        assert len(saves) == 3 and min(saves) > 0, record["events"]
        if rank != 0:
            assert len(waits) == 4 and min(waits) > 0, record["events"]


def test_jobs_on_parts_of_an_mpi4py_split_then_on_the_world_in_one_process(tmp_path):
    run_ok(3, JOBS / "two_runs_job.py", [], tmp_path)
    for rank, record in enumerate(records(tmp_path)):
        part = f"part{0 if rank < 2 else 1}"
        ranks = 2 if rank < 2 else 1
        assert record[part] == {"exit_code": 0, "total": 3.0 * ranks, "num_ranks": ranks}
        assert record["whole"] == {"exit_code": 0, "total": 9.0, "num_ranks": 3}
    from conftest import latest
    assert latest(tmp_path / "part0").ranks == 2 and latest(tmp_path / "part1").ranks == 1
