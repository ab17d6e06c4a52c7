"""A full or read-only disk told apart from other failures, and said once (write_faults.py,
docs/faults.md). SQLite's own "full" error comes from a real database held to one page."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from gputop.core.write_faults import FaultReporter, WriteFault, write_fault_of


def test_errno_values_of_a_full_or_read_only_disk_are_faults() -> None:
    assert write_fault_of(OSError(errno.ENOSPC, "full")) is WriteFault.FULL
    assert write_fault_of(OSError(errno.EDQUOT, "quota")) is WriteFault.FULL
    assert write_fault_of(OSError(errno.EROFS, "ro")) is WriteFault.READ_ONLY
    assert write_fault_of(OSError(errno.EACCES, "denied")) is None
    assert write_fault_of(ValueError("no")) is None


def test_sqlite_saying_the_database_is_full_is_a_full_disk(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "db.sqlite3")
    connection.execute("CREATE TABLE t (x TEXT)")
    connection.commit()
    connection.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.Error) as raised:
        for _ in range(100):
            connection.execute("INSERT INTO t VALUES (?)", ("x" * 4096,))
        connection.commit()
    connection.close()
    assert write_fault_of(raised.value) is WriteFault.FULL


def test_sqlite_refusing_a_read_only_database_is_a_read_only_disk(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as raised:
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()
    assert write_fault_of(raised.value) is WriteFault.READ_ONLY


def test_other_sqlite_errors_are_not_faults(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "db.sqlite3")
    with pytest.raises(sqlite3.Error) as raised:
        connection.execute("SELECT * FROM missing")
    connection.close()
    assert write_fault_of(raised.value, tmp_path) is None


def test_a_fault_is_said_once_and_its_end_once() -> None:
    said: list[str] = []
    reporter = FaultReporter("the job store /s/jobs.sqlite3", "Jobs go on.", said.append)
    for _ in range(3):
        reporter.failed(WriteFault.FULL)
    reporter.succeeded()
    reporter.succeeded()
    assert said == [
        "Cannot write the job store /s/jobs.sqlite3: the disk (or your quota) holding it is "
        "full. Jobs go on.",
        "The job store /s/jobs.sqlite3 can be written again.",
    ]
