"""How a Slurm job ended, as ``squeue --json`` says it, is the controller's number: a 23.02+
``return_code`` was taken as any 32-bit integer (300, -5, 2^31-1 became the job's exit code
in the store), and a 22.05 wait status that no wait gives (negative, past 16 bits) was read
as a made-up exit or signal (-1 on a cancelled job: "signal 127"). An exit code is 0..255
and a signal 1..126 of a wait status; anything else is an exit not known, the job shown."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.slurm_cli import fake_squeue_environ

from gputop.core.slurm.queue import parse_queue

JOB = {"job_id": 5, "name": "x", "user_name": "root", "nodes": "vm", "gres_detail": []}
HUGE = int("9" * 400)


def _ended(exit_code: Any, state: str = "FAILED") -> tuple[int | None, int | None]:
    (job,) = parse_queue(
        json.dumps({"jobs": [{**JOB, "job_state": state, "exit_code": exit_code}]})
    )
    return job.exit_code, job.signal


@pytest.mark.parametrize(
    "return_code",
    [300, 256, -1, -5, 2**31 - 1, -(2**31), HUGE, "3", 3.0, True, None, [3], {"a": {"b": [3]}}],
)
def test_a_return_code_no_exit_gives_is_an_exit_not_known(return_code: Any) -> None:
    plain = {"status": ["EXITED"], "return_code": return_code}
    wrapped = {"status": ["EXITED"], "return_code": {"set": True, "number": return_code}}
    # before: 300, 256, -1, -5, 2^31-1 and -2^31 were the job's exit code
    assert _ended(plain) == (None, None)
    assert _ended(wrapped) == (None, None)


def test_nan_and_deep_nesting_in_a_return_code_are_an_exit_not_known() -> None:
    for number in ("NaN", "Infinity", "-Infinity", "1e999"):
        record = {**JOB, "job_state": "FAILED", "exit_code": {"return_code": "N"}}
        (job,) = parse_queue(json.dumps({"jobs": [record]}).replace('"N"', number))
        assert (job.exit_code, job.signal) == (None, None)
    deep: Any = 3
    for _ in range(500):
        deep = {"number": deep}
    assert _ended({"return_code": deep}) == (None, None)


@pytest.mark.parametrize(("return_code", "code"), [(0, 0), (1, 1), (255, 255)])
def test_a_return_code_of_an_exit_is_the_exit_code(return_code: int, code: int) -> None:
    assert _ended({"status": ["EXITED"], "return_code": return_code}) == (code, None)
    assert _ended({"return_code": {"set": True, "number": return_code}}) == (code, None)


@pytest.mark.parametrize(
    ("signal", "expected"),
    [(9, 9), (15, 15), (0, None), (-9, None), (300, None), ("9", None), (HUGE, None)],
)
def test_a_23_02_signal_is_one_a_process_can_get(signal: Any, expected: int | None) -> None:
    value = {"status": ["SIGNALED"], "return_code": 0, "signal": {"id": signal, "name": "x"}}
    assert _ended(value, "CANCELLED")[1] == expected


@pytest.mark.parametrize("state", ["CANCELLED", "TIMEOUT", "FAILED", "COMPLETED"])
@pytest.mark.parametrize("status", [-1, -15, -(2**31), 1 << 16, 2**31 - 1])
def test_a_22_05_wait_status_no_wait_gives_is_not_known(state: str, status: int) -> None:
    # before: -1 on a cancelled job was "signal 127", on a failed one exit code -1;
    # 1 << 16 was exit 0 (a job that failed shown as succeeding), 2^31-1 exit 255
    assert _ended(status, state) == (None, None)


@pytest.mark.parametrize("status", [0x7F, 0x80, 0xFF])
def test_a_signalled_22_05_status_naming_no_signal_is_not_known(status: int) -> None:
    # 0x7f is a stopped process's status, 0x80 a core dump of signal 0: no signal ended it
    # (before: "signal 127", "signal 0")
    assert _ended(status, "CANCELLED") == (None, None)


@pytest.mark.parametrize(
    ("status", "state", "expected"),
    [
        (0, "COMPLETED", (0, None)),
        (3 << 8, "FAILED", (3, None)),
        (143 << 8, "CANCELLED", (143, None)),
        (15, "CANCELLED", (None, 15)),
        (9 | 0x80, "TIMEOUT", (None, 9)),
        (1, "FAILED", (1, None)),
        (255 << 8, "FAILED", (255, None)),
    ],
)
def test_a_22_05_wait_status_reads_as_before(
    status: int, state: str, expected: tuple[int | None, int | None]
) -> None:
    assert _ended(status, state) == expected


def _gputop(tmp_path: Path, exit_code: Any, state: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """``gputop run --slurm`` submits job 5; squeue then says it ended with ``exit_code``:
    ``gputop jobs --json``'s record of it, and the store's row."""
    environ = fake_squeue_environ(
        tmp_path, {"jobs": [{**JOB, "job_state": state, "exit_code": exit_code}]}
    )
    gputop = [sys.executable, "-m", "gputop"]
    for command in (["run", "--slurm", "--gpus", "1", "--", "python", "x.py"], ["jobs"]):
        done = subprocess.run(
            [*gputop, *command], capture_output=True, text=True, env=environ, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "internal error" not in done.stderr
    listed = subprocess.run(
        [*gputop, "jobs", "--json"], capture_output=True, text=True, env=environ, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    with sqlite3.connect(tmp_path / "state" / "jobs.sqlite3") as connection:
        row = connection.execute("SELECT state, exit_code, signal FROM jobs").fetchone()
    (record,) = json.loads(listed.stdout)
    return record, row


@pytest.mark.parametrize(
    ("exit_code", "state"),
    [
        ({"status": ["EXITED"], "return_code": 300}, "FAILED"),
        ({"status": ["EXITED"], "return_code": {"set": True, "number": -5}}, "FAILED"),
        ({"status": ["EXITED"], "return_code": HUGE}, "FAILED"),
        ({"status": ["EXITED"], "return_code": {"x": [{"y": "z"}]}}, "FAILED"),
        (-1, "CANCELLED"),
    ],
    ids=["300", "minus-5", "400-digits", "nested", "22.05-minus-1-cancelled"],
)
def test_gputop_jobs_records_an_impossible_end_as_not_known(
    tmp_path: Path, exit_code: Any, state: str
) -> None:
    record, row = _gputop(tmp_path, exit_code, state)

    # before: the row held 300 / -5, or signal 127 for the cancelled one ('jobs --json'
    # said "signal": 127, a notify command's status 255)
    assert row == ("ended", None, None)
    assert (record["exit_code"], record["signal"], record["slurm_job_id"]) == (None, None, 5)
    assert record["status_text"] == state.capitalize()
