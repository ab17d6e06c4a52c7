"""An exit code is 0..255 (a signal is recorded apart): a job's row holding any other value
(300, -5, a number of 400 digits, text: changed by hand, or written by an older gputop from
Slurm's return code) is shown as an exit not known, ``failed (exit ?)``, and never refuses
the store or reaches a notify command or ``--json`` as an exit code."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from helpers.jobs import asked_job, run_cli

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.notify import ENDED, JobEvent, event_environment, exit_status
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ended, job_columns, row_to_job


def ended_job(exit_code: int | None, **fields: object) -> Job:
    job = asked_job(id=7, started_at=1.0, ended_at=2.0, state=JobState.ENDED, **fields)
    return dataclasses.replace(job, exit_code=exit_code)


@pytest.mark.parametrize(("code", "shown"), [(0, "exited 0"), (3, "failed 3"), (255, "failed 255")])
def test_an_exit_code_is_shown_as_it_is(code: int, shown: str) -> None:
    job = ended_job(code)
    assert job.status_text == shown
    assert job.to_json()["exit_code"] == code
    assert exit_status(job) == code
    assert event_environment(JobEvent(ENDED, job))["GPUTOP_JOB_EXIT_CODE"] == str(code)


@pytest.mark.parametrize("code", [300, 256, -1, -5, 10**400, -(10**400)], ids=lambda c: repr(c)[:8])
def test_a_code_no_exit_can_be_is_an_exit_not_known(code: int) -> None:
    job = ended_job(code)
    assert (job.status, job.status_text) == ("failed", "failed (exit ?)")
    assert job.to_json()["exit_code"] is None
    assert exit_status(job) == 1
    event = JobEvent(ENDED, job)
    assert event_environment(event)["GPUTOP_JOB_EXIT_CODE"] == ""
    assert "failed (exit ?)" in event.text
    stopped = dataclasses.replace(job, stop_requested=True)
    assert stopped.status_text == "killed (exit ?)"


@pytest.mark.parametrize(
    "code", [300, -5, 10**400, "3", "abc", b"\x00", 2.5, float("inf")], ids=lambda c: repr(c)[:8]
)
def test_a_row_holding_no_exit_code_is_read(code: object) -> None:
    row = job_columns(ended_job(0))
    row["exit_code"] = code
    assert row_to_job(row).status_text == "failed (exit ?)"


LITERALS = ["300", "-5", "1" * 400, "-" + "9" * 400, "1e400", "'abc'", "x'00'", "2.5"]
"""SQLite keeps a whole number of 400 digits as a float (infinity beyond 1e308)."""


@pytest.mark.parametrize("literal", LITERALS, ids=lambda literal: literal[:8])
def test_a_store_row_changed_by_hand_is_shown_and_the_other_jobs_with_it(
    state_dir: Path, literal: str
) -> None:
    with JobStore.open(state_dir) as store:
        hand_edited = store.create_job(asked_job(name="edited.py"))
        store.record(hand_edited.id, ended(exit_code=3))
        other = store.create_job(asked_job(name="other.py"))
        store.record(other.id, ended(exit_code=4))
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    with connection:  # as the sqlite3 shell writes it: a literal, not a bound value
        connection.execute(f"UPDATE jobs SET exit_code = {literal} WHERE id = {hand_edited.id}")
    connection.close()

    with JobStore.open(state_dir) as store:
        shown = {job.name: job.status_text for job in store.list_jobs()}
    assert shown == {"edited.py": "failed (exit ?)", "other.py": "failed 4"}


def test_gputop_jobs_shows_a_text_exit_code_as_not_known(state_dir: Path) -> None:
    with JobStore.open(state_dir) as store:
        job = store.create_job(asked_job(name="edited.py"))
        store.record(job.id, ended(exit_code=3))
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    with connection:
        connection.execute("UPDATE jobs SET exit_code = 'abc'")
    connection.close()

    table = run_cli("jobs")
    assert table.returncode == 0, table.stderr
    assert "failed (exit ?)" in table.stdout
    listed = run_cli("jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert (record["exit_code"], record["status_text"]) == (None, "failed (exit ?)")
