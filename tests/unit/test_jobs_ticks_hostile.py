"""A job store row whose start ticks are not a count of ticks (text, a fraction, a blob,
negative, past 64 bits: changed by hand, or by a broken writer) proves its processes by
their start times, as a row without ticks does. Before, such a row made its running job lost
at the next look, for good, and ``jobs stop`` then said there was nothing to stop while its
process ran on."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.jobs import asked_job

from gputop.core.jobs.model import JobState
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_rows import ProcessSeen, supervisor_seen
from gputop.core.jobs.store_rows import started as started_as
from gputop.core.process_control import process_start


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.parametrize("value", ["abc", 1.5, b"\x00", -5, 10**19 * 9.9], ids=str)
def test_ticks_that_are_no_count_prove_by_the_start_time(
    state_dir: Path, sleeper: subprocess.Popen[bytes], value: object
) -> None:
    started = process_start(sleeper.pid)
    with JobStore.open() as store:
        job = store.create_job(asked_job())
        seen = ProcessSeen(sleeper.pid, started.time, None, started.ticks)
        store.record(job.id, supervisor_seen(seen))
        store.record(job.id, started_as(seen))
        store._conn.execute(
            "UPDATE jobs SET pid_start_ticks = ?, supervisor_start_ticks = ? WHERE id = ?",
            (value, value, job.id),
        )
        seen = store.get(job.id)

    assert seen.state is JobState.RUNNING, seen.note  # before: lost
    assert seen.pid_start_ticks is None and seen.supervisor_start_ticks is None
