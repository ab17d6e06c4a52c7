"""The agent sends a host's active jobs and its newest ended ones, MAX_HOST_JOBS in all, not
every job its store keeps: a host with a long history sent thousands each time one changed.
The lab, for its part, decodes at most that many of what a host sends (test_host_jobs.py,
tests/tui/test_lab_hostile_host.py). docs/lab.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.jobs import store_connection as store_module
from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.store import JobStore
from gputop.core.remote.agent import jobs_sent, read_jobs_from_store
from gputop.core.remote.host_jobs import MAX_HOST_JOBS, host_jobs, left_out

NOW = 1_767_225_630.0


def a_job(job_id: int, state: JobState = JobState.ENDED) -> Job:
    return Job(
        id=job_id,
        name=f"job{job_id}",
        command=("python", "train.py"),
        command_text="python train.py",
        uses_shell=False,
        cwd="/",
        physical_indices=(0,),
        uuids=(),
        env={},
        mode=RunMode.DETACHED,
        state=state,
        log_path="/dev/null",
        created_at=NOW + job_id,
    )


def test_a_short_list_is_sent_whole() -> None:
    jobs = [a_job(n) for n in range(1, 11)]

    assert jobs_sent(jobs, limit=10) == jobs


def test_the_active_jobs_and_the_newest_ended_ones_are_sent_oldest_first() -> None:
    jobs = [a_job(n) for n in range(1, 101)]
    jobs[4] = a_job(5, JobState.RUNNING)  # old, still running
    jobs[9] = a_job(10, JobState.WAITING)

    sent = jobs_sent(jobs, limit=10)

    assert [job.id for job in sent] == [5, 10, 93, 94, 95, 96, 97, 98, 99, 100]


def test_more_active_jobs_than_the_limit_sends_the_newest_of_them() -> None:
    jobs = [a_job(n, JobState.WAITING if n % 2 else JobState.ENDED) for n in range(1, 41)]

    sent = jobs_sent(jobs, limit=5)

    assert [job.id for job in sent] == [31, 33, 35, 37, 39]


def test_the_agent_reads_at_most_the_limit_from_a_store_of_thousands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(state_dir))
    jobs = [a_job(n) for n in range(1, 3001)]
    jobs[0] = a_job(1, JobState.RUNNING)
    monkeypatch.setattr(JobStore, "list_jobs", lambda self: jobs)

    records, error = read_jobs_from_store()()
    store_module._OPEN[state_dir.absolute()].close()  # the agent's, kept open between reads

    assert error is None and records is not None
    assert len(records) == MAX_HOST_JOBS
    assert records[0]["id"] == 1 and records[0]["status"] == "running"
    assert [r["id"] for r in records[1:]] == list(range(3002 - MAX_HOST_JOBS, 3001))
    # what it sends, a lab decodes whole
    assert len(host_jobs(0, "node1", records)) == MAX_HOST_JOBS
    assert left_out(records) == 0


def test_an_older_agents_whole_list_is_decoded_newest_first_and_the_rest_counted() -> None:
    records = [{"id": n, "status": "exited"} for n in range(1, 2001)]

    decoded = host_jobs(0, "node1", records)

    assert [job.id for job in decoded] == list(range(2001 - MAX_HOST_JOBS, 2001))
    assert left_out(records) == 2000 - MAX_HOST_JOBS
