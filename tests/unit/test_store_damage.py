"""Damage is proven, not guessed; what a damaged store holds is kept (docs/sqlite.md).

A real store on disk with real damage: one page in the middle of the jobs table overwritten.
A reader refuses it and leaves it exactly as it is; a command that records jobs proves the
damage with an integrity check under the open lock, moves the store aside and carries every
job SQLite can still return into the new one, rebuilding from the logs (and the ends kept
beside the store) the jobs whose rows are gone. A passing error is retried and never moves a
store aside; a store with a negative or foreign version is refused, exit 2.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.jobs import asked_job

from gputop.core import sqlite_files
from gputop.core.jobs.model import JobState
from gputop.core.jobs.store import JobStore, StoreError
from gputop.core.jobs.store_file import REBUILT_NOTE
from gputop.core.jobs.store_rows import ended
from gputop.core.jobs.unrecorded import RecordedEnd, keep_end

JOBS = 300
PAGE = 4096


def _fill(state_dir: Path) -> dict[int, dict[str, str]]:
    """JOBS jobs with bulky environments (so the table spans many pages), checkpointed
    into the main file and closed: the state a store is in between two commands."""
    envs: dict[int, dict[str, str]] = {}
    with JobStore.open(state_dir) as store:
        for n in range(JOBS):
            env = {"CUDA_VISIBLE_DEVICES": str(n % 4), "PAD": f"{n:04d}" * 200}
            job = store.create_job(
                asked_job(
                    name=f"job-{n}",
                    command=["python", f"train{n}.py"],
                    physical_indices=[n % 4],
                    uuids=[f"GPU-{n % 4}"],
                    env=env,
                )
            )
            store.record(job.id, ended(exit_code=n % 3))
            envs[job.id] = env
        store.add_history("python train0.py")
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return envs


def _damage_a_middle_page(path: Path) -> None:
    size = path.stat().st_size
    page = (size // PAGE) // 2
    with open(path, "r+b") as handle:
        handle.seek(page * PAGE)
        handle.write(bytes(range(256)) * (PAGE // 256))


def test_a_reader_leaves_a_damaged_store_as_it_is(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    _fill(state_dir)
    path = state_dir / "jobs.sqlite3"
    _damage_a_middle_page(path)
    before = path.read_bytes()

    with pytest.raises(StoreError, match="It was left as it is"):
        JobStore.open(state_dir)
    listed = subprocess.run(
        [sys.executable, "-m", "gputop", "jobs", "--json"],
        env={**os.environ, "GPUTOP_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert "It was left as it is" in listed.stderr
    assert path.read_bytes() == before
    assert not list(state_dir.glob("*.corrupt-*"))


def test_a_proven_damage_keeps_every_job_sqlite_can_still_return(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    envs = _fill(state_dir)
    path = state_dir / "jobs.sqlite3"
    _damage_a_middle_page(path)
    # the end of one job whose row is on the damaged page, kept beside the store
    keep_end(state_dir, RecordedEnd(job_id=150, ended_at=1.8e9 - 5, exit_code=3))

    with JobStore.open(state_dir, repair=True) as store:
        (notice,) = store.notices
        jobs = {job.id: job for job in store.list_jobs()}
        history = store.history()
    (moved,) = [p for p in state_dir.glob("jobs.sqlite3.corrupt-*") if p.name[-1].isdigit()]
    assert str(moved) in notice and "was damaged (" in notice, notice

    read_back = [job for job in jobs.values() if job.note != REBUILT_NOTE]
    rebuilt = [job for job in jobs.values() if job.note == REBUILT_NOTE]
    assert f"{len(read_back)} jobs read back from it" in notice
    # one 4 KiB page holds at most a few of these rows; every other row comes back whole
    assert len(read_back) >= JOBS - 10, notice
    for job in read_back:
        assert job.env == envs[job.id] and job.name == f"job-{job.id - 1}"
        assert job.state is JobState.ENDED and job.exit_code == (job.id - 1) % 3
    # the rows that were lost have no log (these jobs were only recorded), so nothing is
    # rebuilt for them, except where a log exists: every job here had one
    assert len(read_back) + len(rebuilt) == JOBS
    assert f"{len(rebuilt)} rebuilt from their logs" in notice or not rebuilt
    for job in rebuilt:
        assert job.log_path == str(state_dir / "logs" / f"{job.id}.log")
        assert job.command == () and job.token is None
    kept_end = jobs[150]
    if kept_end.note == REBUILT_NOTE:
        assert kept_end.state is JobState.ENDED and kept_end.exit_code == 3
    assert history == ["python train0.py"]
    with JobStore.open(state_dir) as store:
        assert store.create_job(asked_job(name="next", command=["true"])).id == JOBS + 1


def test_a_passing_error_is_retried_and_never_moves_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    _fill(state_dir)
    real_check = sqlite_files.check
    failures = iter([True, True])

    def flaky(kind: sqlite_files.StoreKind, connection: sqlite3.Connection) -> int:
        if next(failures, False):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real_check(kind, connection)

    monkeypatch.setattr(sqlite_files, "check", flaky)
    with JobStore.open(state_dir, repair=True) as store:
        assert store.notices == [] and len(store.list_jobs()) == JOBS
    assert not list(state_dir.glob("*.corrupt-*"))


def test_a_check_that_keeps_failing_on_a_sound_store_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even three failed first checks are no proof: the integrity check decides."""
    state_dir = tmp_path / "state"
    _fill(state_dir)

    def always(kind: sqlite_files.StoreKind, connection: sqlite3.Connection) -> int:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(sqlite_files, "check", always)
    with pytest.raises(StoreError, match="integrity check found it sound"):
        JobStore.open(state_dir, repair=True)
    assert not list(state_dir.glob("*.corrupt-*"))
    monkeypatch.undo()
    with JobStore.open(state_dir) as store:
        assert len(store.list_jobs()) == JOBS


@pytest.mark.parametrize("version", [-5, -(2**31)])
def test_a_negative_store_version_is_refused_exit_2(tmp_path: Path, version: int) -> None:
    state_dir = tmp_path / "state"
    _fill(state_dir)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute(f"PRAGMA user_version = {version}")
    connection.commit()
    connection.close()
    before = (state_dir / "jobs.sqlite3").read_bytes()
    env = {**os.environ, "GPUTOP_STATE_DIR": str(state_dir)}
    for argv in (["jobs", "--json"], ["run", "--fake", "v100x4", "--gpus", "0", "--", "true"]):
        result = subprocess.run(
            [sys.executable, "-m", "gputop", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert f"store version {version}, which no gputop writes" in result.stderr
        assert "Traceback" not in result.stderr
    assert (state_dir / "jobs.sqlite3").read_bytes() == before


def test_a_database_gputop_did_not_create_is_refused(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.execute("CREATE TABLE photos (name TEXT)")
    connection.commit()
    connection.close()
    with pytest.raises(StoreError, match="a database gputop did not create") as error:
        JobStore.open(state_dir, repair=True)
    assert error.value.exit_code == 2
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    assert connection.execute("SELECT name FROM sqlite_master").fetchall() == [("photos",)]
    connection.close()


def test_the_jobs_json_of_a_carried_store_is_strict(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    _fill(state_dir)
    _damage_a_middle_page(state_dir / "jobs.sqlite3")
    JobStore.open(state_dir, repair=True).close()
    listed = subprocess.run(
        [sys.executable, "-m", "gputop", "jobs", "--json"],
        env={**os.environ, "GPUTOP_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    jobs = json.loads(listed.stdout, parse_constant=lambda name: pytest.fail(name))
    assert len(jobs) == JOBS
