"""Reading ``squeue --json`` as Slurm 22.05 and 23.02+ print it (docs/slurm.md)."""

from __future__ import annotations

import json

import pytest

from gputop.core.slurm.commands import SlurmError
from gputop.core.slurm.queue import parse_gpu_indices, parse_queue


@pytest.mark.parametrize(
    ("gres_detail", "indices"),
    [
        (["gpu:1(IDX:2)"], (2,)),
        (["gpu:a100:3(IDX:0,2-3)"], (0, 2, 3)),
        (["gpu:2(IDX:N/A)"], ()),
        (["gpu:1(IDX:1)", "gpu:1(IDX:1)"], (1,)),
        (["mps:100(IDX:0)", "gpu:1(IDX:3)"], (3,)),
        (["gpu:1(IDX:0-99999999)"], ()),
        ([], ()),
    ],
)
def test_the_gpu_indices_are_read_from_gres_detail(
    gres_detail: list[str], indices: tuple[int, ...]
) -> None:
    assert parse_gpu_indices(gres_detail) == indices


SLURM_22_05_PENDING = {
    "job_id": 12,
    "name": "train",
    "user_name": "alice",
    "job_state": "PENDING",
    "state_reason": "Resources",
    "partition": "debug",
    "nodes": "",
    "gres_detail": [],
    "start_time": 0,
    "end_time": 0,
    "time_limit": None,
    "exit_code": 0,
}
SLURM_23_11_RUNNING = {
    "job_id": 13,
    "name": "eval",
    "user_name": "bob",
    "job_state": ["RUNNING"],
    "state_reason": "None",
    "partition": "gpu",
    "nodes": "node7",
    "gres_detail": ["gpu:h100:2(IDX:1,3)"],
    "start_time": {"set": True, "infinite": False, "number": 1000},
    "end_time": {"set": True, "infinite": False, "number": 4600},
    "time_limit": {"set": True, "infinite": False, "number": 60},
    "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
}


def test_a_pending_job_of_slurm_22_05_says_its_reason() -> None:
    (job,) = parse_queue(json.dumps({"jobs": [SLURM_22_05_PENDING], "errors": []}))

    assert (job.job_id, job.user, job.status_text, job.gpu_indices) == (
        12,
        "alice",
        "Pending: Resources",
        (),
    )


def test_a_running_job_of_slurm_23_11_has_its_cards_and_time_left() -> None:
    (job,) = parse_queue(json.dumps({"jobs": [SLURM_23_11_RUNNING]}))

    assert (job.state, job.gpu_indices, job.time_limit_minutes) == ("RUNNING", (1, 3), 60)
    assert job.time_left_s(now=1600.0) == 3000.0


def test_a_job_cancelled_by_a_signal_reads_as_that_signal() -> None:
    record = {**SLURM_22_05_PENDING, "job_state": "CANCELLED", "exit_code": 15}
    (job,) = parse_queue(json.dumps({"jobs": [record]}))

    assert (job.exit_code, job.signal) == (None, 15)


def test_an_exit_status_reads_as_the_exit_code() -> None:
    record = {**SLURM_22_05_PENDING, "job_state": "FAILED", "exit_code": 3 << 8}
    (job,) = parse_queue(json.dumps({"jobs": [record]}))

    assert (job.exit_code, job.signal) == (3, None)


def test_errors_squeue_reports_with_exit_status_0_are_an_error() -> None:
    document = {
        "errors": [{"description": "Failed while looking for jobs", "error": "Unspecified error"}],
        "jobs": [],
    }
    with pytest.raises(SlurmError, match=r"Failed while looking for jobs \(Unspecified error\)"):
        parse_queue(json.dumps(document))


def test_output_that_is_not_json_is_a_clear_error() -> None:
    with pytest.raises(SlurmError, match="not JSON"):
        parse_queue("slurm_load_jobs error: Unable to contact slurm controller")


def test_output_nested_deeper_than_the_decoder_recurses_is_the_same_clear_error() -> None:
    with pytest.raises(SlurmError, match="not JSON"):
        parse_queue('{"jobs":' + "[" * 100_000)


def test_the_status_shown_carries_no_terminal_control() -> None:
    record = {**SLURM_22_05_PENDING, "state_reason": "Re\x1b]52;c;AAAA\x07sources"}
    (job,) = parse_queue(json.dumps({"jobs": [record]}))

    assert "\x1b" not in job.status_text


def test_impossible_numbers_from_squeue_are_not_available() -> None:
    record = {
        **SLURM_23_11_RUNNING,
        "start_time": 10**20,
        "end_time": {"set": True, "number": -5},
        "time_limit": 2**40,
    }

    (job,) = parse_queue(json.dumps({"jobs": [record]}))

    assert (job.start_time, job.end_time, job.time_limit_minutes) == (None, None, None)
    assert parse_queue(json.dumps({"jobs": [{**record, "job_id": 2**40}]})) == []
