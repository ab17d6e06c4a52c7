"""What a damaged job store still holds, carried into the new one (docs/sqlite.md).

Every row SQLite still returns is recorded again as it was; a job whose row is lost but
whose log remains is rebuilt from the log and the end its supervisor kept (unrecorded.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from gputop.core.jobs.model import DEFAULT_GRACE_S, JobState, RunMode
from gputop.core.jobs.store_rows import insert_row, row_to_job
from gputop.core.jobs.unrecorded import read_pending_ends
from gputop.core.numbers import is_ascii_digits
from gputop.core.sqlite_files import readable_rows

REBUILT_NOTE = (
    "rebuilt from its log after the job store was damaged: its command and cards are not known"
)
"""A still running supervisor records its job again over such a row (JobStore.adopt)."""

MAX_LOG_ID_DIGITS = 18
"""A log named with more digits is no job's: ids stay below 2**63 (a log named 2**63-1 made
every launch fail as "disk is full"), and new ones follow."""


@dataclass(frozen=True)
class SalvageCounts:
    """How much of a damaged store the new one holds: rows read back whole, jobs rebuilt
    from their logs, remembered commands; why nothing could be read (``None``: it could)."""

    kept: int
    rebuilt: int
    commands: int
    unreadable: str | None = None

    def describe(self) -> str:
        jobs = f"{self.kept} job{'s' if self.kept != 1 else ''} read back from it"
        if self.rebuilt:
            jobs += f" and {self.rebuilt} rebuilt from their logs"
        text = f"{jobs} were kept in the new store"
        if self.unreadable:
            text += f" (nothing could be read from the damaged file: {self.unreadable})"
        return text


def carry_over(damaged: Path, connection: sqlite3.Connection, state_dir: Path) -> SalvageCounts:
    """Record in ``connection`` (the new, empty store) what ``damaged`` still holds."""
    logs_dir = state_dir / "logs"
    ids = log_ids(logs_dir)
    job_rows: list[dict[str, object]] = []
    history_rows: list[dict[str, object]] = []
    unreadable = None
    try:
        old = sqlite3.connect(
            f"file:{urllib.parse.quote(str(damaged))}?mode=ro", uri=True, isolation_level=None
        )
    except sqlite3.Error as error:
        old, unreadable = None, str(error)
    if old is not None:
        try:
            old.row_factory = sqlite3.Row
            old.execute("PRAGMA trusted_schema = OFF")
            with contextlib.suppress(sqlite3.DatabaseError):
                job_rows = readable_rows(old, "jobs", ids)
            with contextlib.suppress(sqlite3.DatabaseError):
                history_rows = readable_rows(old, "history")
            if not job_rows and not history_rows:
                try:
                    old.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                except sqlite3.DatabaseError as error:
                    unreadable = str(error)
        finally:
            old.close()
    columns = [row[1] for row in connection.execute("PRAGMA table_info(jobs)")]
    kept = _insert_jobs(connection, job_rows, columns)
    rebuilt = _rebuild_from_logs(connection, logs_dir, ids, state_dir)
    commands = _insert_history(connection, history_rows)
    return SalvageCounts(kept, rebuilt, commands, unreadable)


def log_ids(logs_dir: Path, *, logs_only: bool = True) -> set[int]:
    """The job ids files in ``logs_dir`` are named after: ``ID.log`` (``logs_only`` False:
    any ``ID`` or ``ID.*``, which new ids continue after)."""
    ids: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(logs_dir):
            stem, _, suffix = entry.name.partition(".")
            wanted = suffix == "log" or not logs_only
            if wanted and is_ascii_digits(stem) and len(stem) <= MAX_LOG_ID_DIGITS:
                ids.add(int(stem))
    return ids


def _insert_jobs(
    connection: sqlite3.Connection, rows: list[dict[str, object]], columns: list[str]
) -> int:
    """Each readable row as it was; a row whose values no longer make a job is left out."""
    kept = 0
    for row in rows:
        known = {name: value for name, value in row.items() if name in columns}
        if "id" not in known:
            continue
        try:
            connection.execute("SAVEPOINT carry")
            insert_row(connection, known, "INSERT OR IGNORE")
            again = connection.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone()
            row_to_job(again)
        except Exception:
            connection.execute("ROLLBACK TO carry")
            connection.execute("RELEASE carry")
            continue
        connection.execute("RELEASE carry")
        kept += 1
    return kept


def _rebuild_from_logs(
    connection: sqlite3.Connection, logs_dir: Path, ids: set[int], state_dir: Path
) -> int:
    """A job for each log whose row is gone: lost, or ended as its kept end says."""
    present = {int(row[0]) for row in connection.execute("SELECT id FROM jobs")}
    missing = sorted(ids - present)
    if not missing:
        return 0
    ends = read_pending_ends(state_dir)
    host = socket.gethostname()
    rows = []
    for job_id in missing:
        log_path = logs_dir / f"{job_id}.log"
        try:
            created = os.stat(log_path, follow_symlinks=False).st_mtime
        except OSError:
            created = 0.0
        end = ends.get(job_id)
        state = JobState.LOST if end is None else JobState.ENDED
        how: tuple[float | int | None, ...] = (created, None, None, None)  # created, how it ended
        if end is not None:
            how = (min(created, end.ended_at), end.ended_at, end.exit_code, end.signal)
        basics = (job_id, f"job {job_id}", "(not known)", RunMode.DETACHED.value, state.value)
        rows.append((*basics, str(log_path), *how, REBUILT_NOTE, host, DEFAULT_GRACE_S))
    connection.executemany(  # at once: a user of years may have 100,000 logs
        "INSERT OR IGNORE INTO jobs (id, name, command, command_text, uses_shell, cwd, "
        "physical_indices, uuids, env, mode, state, log_path, created_at, ended_at, "
        "exit_code, signal, note, host, grace_s, wait_for_free) "
        "VALUES (?, ?, '[]', ?, 0, '', '[]', '[]', '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        rows,
    )
    return len(missing)


def _insert_history(connection: sqlite3.Connection, rows: list[dict[str, object]]) -> int:
    carried = 0
    for row in rows:
        try:
            text, seq, used_at = row["command_text"], row["seq"], row["used_at"]
        except (IndexError, KeyError):
            continue
        if not isinstance(text, (str, bytes)) or not isinstance(seq, int):  # bytes: not UTF-8
            continue
        with contextlib.suppress(sqlite3.Error):
            connection.execute(
                "INSERT OR IGNORE INTO history (command_text, seq, used_at) VALUES (?, ?, ?)",
                (text, seq, used_at if isinstance(used_at, (int, float)) else 0.0),
            )
            carried += 1
    return carried
