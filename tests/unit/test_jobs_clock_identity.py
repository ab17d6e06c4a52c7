"""A process's identity by what no clock moves: its start in clock ticks since boot, in the
same boot. Records of a gputop before the ticks (no columns, no key) read as before and
are proven by their start times; a store keeps its version, so both read it.

The real clock step, in a mount namespace: tests/real/test_jobs_clock_step.py."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.jobs import asked_job

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_file import DB_NAME, SCHEMA_VERSION, open_read_only
from gputop.core.jobs.store_rows import row_to_job, supervisor_seen
from gputop.core.jobs.store_rows import started as started_as
from gputop.core.jobs.unrecorded import ProcessSeen, Unrecorded, read_unrecorded
from gputop.core.process_control import (
    ProcessGone,
    Recorded,
    current_boot_id,
    pinned,
    process_alive,
    process_start,
    start_ticks,
)

STEP_S = 3600.0


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def _make_job(store: JobStore, name: str = "train.py") -> Job:
    return store.create_job(asked_job(name=name))


def test_a_start_in_ticks_is_read_from_proc_and_does_not_change(sleeper) -> None:
    started = process_start(sleeper.pid)

    assert started.ticks is not None and started.ticks > 0
    assert start_ticks(sleeper.pid) == started.ticks
    assert started.time is not None
    assert start_ticks(2**22 + 1) is None  # no such pid


def test_by_its_ticks_a_process_is_proven_whatever_its_start_time_reads(sleeper) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None
    boot = current_boot_id()
    for stepped in (started.time + STEP_S, started.time - STEP_S):  # a step either way
        recorded = Recorded(sleeper.pid, stepped, None, boot, started.ticks)
        with pinned(recorded) as pidfd:
            assert pidfd is not None or not hasattr(os, "pidfd_open")
        assert process_alive(sleeper.pid, stepped, started.ticks, boot)


def test_other_ticks_are_another_process_even_at_the_same_start_time(sleeper) -> None:
    started = process_start(sleeper.pid)
    assert started.ticks is not None
    recorded = Recorded(sleeper.pid, started.time, None, current_boot_id(), started.ticks + 1)

    with pytest.raises(ProcessGone, match="belongs to another process"), pinned(recorded):
        pass
    assert not process_alive(sleeper.pid, started.time, started.ticks + 1, current_boot_id())


def test_a_record_without_ticks_is_proven_by_its_start_time_as_before(sleeper) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None
    boot = current_boot_id()

    assert process_alive(sleeper.pid, started.time, None, boot)
    assert not process_alive(sleeper.pid, started.time + STEP_S, None, boot)
    with pinned(Recorded(sleeper.pid, started.time, None, boot)):
        pass


def test_ticks_of_another_boot_are_never_trusted(sleeper) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None
    # pinned refuses it as of an earlier boot; process_alive falls back to the start time
    recorded = Recorded(sleeper.pid, started.time + STEP_S, None, "another-boot", started.ticks)

    with pytest.raises(ProcessGone, match="restarted"), pinned(recorded):
        pass
    assert not process_alive(sleeper.pid, started.time + STEP_S, started.ticks, "another-boot")


def test_the_store_records_ticks_and_a_job_survives_a_step_of_its_start_times(
    state_dir: Path, sleeper
) -> None:
    started = process_start(sleeper.pid)
    assert started.time is not None
    with JobStore.open() as store:
        job = _make_job(store)
        # as if the clock stepped an hour after both were recorded
        seen = ProcessSeen(sleeper.pid, started.time - STEP_S, None, started.ticks)
        store.record(job.id, supervisor_seen(seen))
        store.record(job.id, started_as(seen))
        seen = store.get(job.id)

    assert seen.state is JobState.RUNNING, seen.note
    assert (seen.pid_start_ticks, seen.supervisor_start_ticks) == (started.ticks, started.ticks)


def test_a_job_recorded_by_the_old_format_reads_and_is_proven_by_its_start_time(
    state_dir: Path, sleeper
) -> None:
    """A store as a gputop before the ticks wrote it: no such columns, version 4."""
    started = process_start(sleeper.pid)
    with JobStore.open() as store:
        job = _make_job(store)
        other = _make_job(store, "gone.py")
    connection = sqlite3.connect(state_dir / DB_NAME)
    connection.execute("ALTER TABLE jobs DROP COLUMN pid_start_ticks")
    connection.execute("ALTER TABLE jobs DROP COLUMN supervisor_start_ticks")
    # what the older gputop's own writes set: the start times, no ticks
    for job_id, start in ((job.id, started.time), (other.id, (started.time or 0) - STEP_S)):
        connection.execute(
            "UPDATE jobs SET supervisor_pid = ?, supervisor_start_time = ?, pid = ?, "
            "pid_start_time = ?, state = 'running', started_at = ? WHERE id = ?",
            (sleeper.pid, start, sleeper.pid, start, start, job_id),
        )
    connection.commit()
    connection.close()

    read_only = open_read_only(state_dir)  # as where nothing can be written: no column added
    try:
        rows = read_only.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        read = [row_to_job(row) for row in rows]
    finally:
        read_only.close()
    with JobStore.open() as store:
        kept, lost = store.get(job.id), store.get(other.id)
        version = store._conn.execute("PRAGMA user_version").fetchone()[0]
        columns = {row[1] for row in store._conn.execute("PRAGMA table_info(jobs)")}

    assert [one.pid_start_ticks for one in read] == [None, None]
    assert kept.state is JobState.RUNNING and kept.pid_start_ticks is None
    assert lost.state is JobState.LOST  # its start time is another process's: as before
    assert version == SCHEMA_VERSION == 4  # an older gputop still opens it
    assert {"pid_start_ticks", "supervisor_start_ticks"} <= columns  # added on opening


def test_an_older_gputops_insert_leaves_the_ticks_null(state_dir: Path) -> None:
    """An older gputop names every column it writes: a row it adds has no ticks, and reads."""
    with JobStore.open() as store:
        job = _make_job(store)
        row = dict(store._conn.execute("SELECT * FROM jobs WHERE id = ?", (job.id,)).fetchone())
        old = {k: v for k, v in row.items() if not k.endswith("_ticks") and k != "id"}
        store._conn.execute(
            f"INSERT INTO jobs ({', '.join(old)}) VALUES ({', '.join('?' for _ in old)})",
            tuple(old.values()),
        )
        added = max(store.list_jobs(), key=lambda one: one.id)
    assert added.id > job.id
    assert (added.pid_start_ticks, added.supervisor_start_ticks) == (None, None)


def test_a_kept_file_holds_the_ticks_and_one_without_them_reads_as_before(
    state_dir: Path,
) -> None:
    run = state_dir / "run"
    run.mkdir(parents=True, mode=0o700)
    with_ticks = Unrecorded(
        1, ProcessSeen(10, 1.7e9, 10, 12345), ProcessSeen(11, 1.7e9, 11, 12346), 1.7e9
    )
    record = json.loads(with_ticks.to_bytes())
    old = {
        "job": 2,
        "supervisor": {"pid": 10, "start_time": 1.7e9, "session": 10},
        "started": {"pid": 11, "start_time": 1.7e9, "session": 11, "at": 1.7e9},
    }
    bad = {**old, "job": 3, "supervisor": {**old["supervisor"], "start_ticks": -1}}
    huge = {**old, "job": 4, "supervisor": {**old["supervisor"], "start_time": 10**400}}
    for job_id, data in ((1, with_ticks.to_bytes()), (2, json.dumps(old).encode())):
        (run / f"{job_id}.end").write_bytes(data)
    (run / "3.end").write_bytes(json.dumps(bad).encode())
    (run / "4.end").write_bytes(json.dumps(huge).encode())
    for path in run.iterdir():
        path.chmod(0o600)

    found = read_unrecorded(state_dir)

    assert record["supervisor"]["start_ticks"] == 12345
    assert found[1].supervisor == ProcessSeen(10, 1.7e9, 10, 12345)
    assert found[1].started is not None and found[1].started.start_ticks == 12346
    assert found[2].supervisor == ProcessSeen(10, 1.7e9, 10, None)
    assert 3 not in found and 4 not in found  # no supervisor writes these


def test_a_lost_job_ends_when_it_was_found_lost_and_its_note_is_of_then(
    state_dir: Path, sleeper
) -> None:
    supervisor = subprocess.Popen(["sleep", "60"])
    started = process_start(sleeper.pid)
    ran = process_start(supervisor.pid)
    with JobStore.open() as store:
        job = _make_job(store)
        store.record(
            job.id, supervisor_seen(ProcessSeen(supervisor.pid, ran.time, None, ran.ticks))
        )
        seen = ProcessSeen(sleeper.pid, started.time, None, started.ticks)
        store.record(job.id, started_as(seen))
    supervisor.send_signal(signal.SIGKILL)
    supervisor.wait()

    with JobStore.open() as store:
        lost = store.get(job.id)
        again = store.get(job.id)

    assert lost.state is JobState.LOST and lost.ended_at is not None
    assert lost.note is not None and "was still running when this was found" in lost.note
    assert lost.duration_s(lost.ended_at + 3600) == lost.duration_s(lost.ended_at)
    assert again.ended_at == lost.ended_at  # found once: later reads do not move it


def test_a_job_lost_before_its_end_was_recorded_has_no_growing_duration(state_dir: Path) -> None:
    with JobStore.open() as store:
        job = _make_job(store)
        store.record(job.id, started_as(ProcessSeen(2**22, 1.7e9, None), 1.7e9))
        # as a gputop before this marked it lost: no ended_at
        store._conn.execute("UPDATE jobs SET state = 'lost', note = 'gone' WHERE id = ?", (job.id,))
        lost = store.get(job.id)

    assert lost.state is JobState.LOST and lost.ended_at is None
    assert lost.duration_s(1.7e9 + 10) is None and lost.duration_s(1.7e9 + 1e6) is None
