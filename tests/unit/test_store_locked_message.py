"""A store another process holds locked: the message says gputop waited for it, and how long.

A real second connection holds ``BEGIN EXCLUSIVE`` on the store file; the waits are made
short here (the stores' own are 30 s and 5 s, named in the last test).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.history import holders_scenario
from helpers.jobs import asked_job

from gputop.core.history import store as history_store
from gputop.core.history import writer
from gputop.core.history.store import open_for_recording
from gputop.core.history.writer import HistoryWriter
from gputop.core.jobs import store_connection, store_file
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.store_file import StoreError
from gputop.core.sampling.source import open_backend
from gputop.core.sqlite_files import store_cause


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = dataclasses.replace(store_file.JOBS, busy_timeout_s=0.2)
    monkeypatch.setattr(store_file, "JOBS", jobs)
    monkeypatch.setattr(store_connection, "JOBS", jobs, raising=False)
    history = dataclasses.replace(history_store.HISTORY, busy_timeout_s=0.2)
    monkeypatch.setattr(history_store, "HISTORY", history)
    monkeypatch.setattr(writer, "HISTORY", history, raising=False)


def _held(path: Path) -> Iterator[sqlite3.Connection]:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield holder
    finally:
        holder.execute("ROLLBACK")
        holder.close()


LOCKED = "database is locked by another process (waited 0.2 s)"


def test_a_locked_job_store_says_gputop_waited(tmp_path: Path, short_waits: None) -> None:
    """Before: 'Cannot write the job store ...: database is locked.' (after 30 s of nothing)."""
    with JobStore.open(tmp_path / "state") as store:
        for _ in _held(store.db_path):
            with pytest.raises(StoreError) as raised:
                store.create_job(asked_job(name="x", command=["true"]))
    assert f"Cannot write the job store {store.db_path}: {LOCKED}; try again." == str(raised.value)


def test_a_store_another_program_holds_before_gputop_opens_it(
    tmp_path: Path, short_waits: None
) -> None:
    """The file was made and locked by another program (no WAL yet): opening fails."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    for _ in _held(state_dir / "jobs.sqlite3"):
        with pytest.raises(StoreError) as raised:
            JobStore.open(state_dir)
    assert f"{LOCKED}; try again." in str(raised.value)
    path = tmp_path / "history" / "history.sqlite3"
    path.parent.mkdir(mode=0o700)
    for _ in _held(path):
        with pytest.raises(StoreError) as raised:
            history_store.open_for_recording(path, [])
    assert f"Cannot open the history store {path}: {LOCKED}; try again." == str(raised.value)


def test_the_recorder_says_it_waited(tmp_path: Path, short_waits: None) -> None:
    path = tmp_path / "state" / "history.sqlite3"
    connection = open_for_recording(path, [])
    connection.execute("PRAGMA busy_timeout = 200")
    backend = open_backend(holders_scenario(tmp_path / "h.json"), environ={"GPUTOP_FAKE_TIME": "0"})
    told: list[str] = []
    recorder = HistoryWriter(connection, path, told.append)
    try:
        for _ in _held(path):
            recorder.add(backend.sample(), 1.0)
            assert not recorder.flush()
        assert recorder.flush()
    finally:
        backend.close()
        connection.close()
    assert told[0].startswith(f"Cannot write the history store {path}: {LOCKED}. gputop keeps")


def test_the_stores_own_waits_are_named(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "s.sqlite3", timeout=0, isolation_level=None)
    connection.execute("CREATE TABLE t (x)")
    for _ in _held(tmp_path / "s.sqlite3"):
        with pytest.raises(sqlite3.OperationalError) as raised:
            connection.execute("SELECT * FROM t")
    connection.close()
    assert store_cause(store_file.JOBS, raised.value).endswith("(waited 30 s); try again")
    assert "(waited 5 s)" in store_cause(history_store.HISTORY, raised.value)
    assert store_cause(store_file.JOBS, sqlite3.OperationalError("disk I/O error")) == (
        "disk I/O error"
    )
