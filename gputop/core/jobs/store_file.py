"""The job store's file: its schema, migrations and kind (sqlite_files.py has the lifecycle).

Never lose a job silently: opening is serialised by a lock file, so two processes never both
repair one store; a damaged store is moved aside only by a command that records jobs, with
what it still holds carried over (docs/sqlite.md): every row SQLite still returns is
recorded again as it was, and a job whose row is lost but whose log remains is rebuilt from
the log and the end its supervisor kept (unrecorded.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from gputop.core.jobs.model import DEFAULT_GRACE_S, JobState, RunMode
from gputop.core.jobs.store_rows import insert_row, row_to_job
from gputop.core.jobs.unrecorded import read_pending_ends
from gputop.core.numbers import is_ascii_digits
from gputop.core.private_files import (
    STATE_DIR_ENV,
    StoreError,
    default_state_dir,
    open_private_dir,
    open_private_file,
    open_private_subdir,
)
from gputop.core.sqlite_files import (
    StoreKind,
    cannot,
    check,
    connect,
    create,
    immediate,
    open_for_writing,
    prepare,
    readable_rows,
)
from gputop.core.sqlite_files import open_read_only as _open_read_only

__all__ = ["StoreError", "default_state_dir"]

SCHEMA_VERSION = 4
DB_NAME = "jobs.sqlite3"
LOGS_DIR = "logs"
LOCK_NAME = "jobs.lock"
BUSY_TIMEOUT_S = 30.0


_SCHEMA = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    command TEXT NOT NULL,
    command_text TEXT NOT NULL,
    uses_shell INTEGER NOT NULL,
    cwd TEXT NOT NULL,
    physical_indices TEXT NOT NULL,
    uuids TEXT NOT NULL,
    env TEXT NOT NULL,
    mode TEXT NOT NULL,
    state TEXT NOT NULL,
    log_path TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    pid INTEGER,
    pid_start_time REAL,
    supervisor_pid INTEGER,
    supervisor_start_time REAL,
    exit_code INTEGER,
    signal INTEGER,
    note TEXT,
    host TEXT NOT NULL,
    grace_s REAL NOT NULL,
    wait_for_free INTEGER NOT NULL,
    wait_count INTEGER,
    wait_min_free_mib INTEGER,
    wait_max_util_percent INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    boot_id TEXT,
    session_id INTEGER,
    supervisor_session_id INTEGER,
    token TEXT,
    slurm_job_id INTEGER,
    usage TEXT,
    pid_start_ticks INTEGER,
    supervisor_start_ticks INTEGER
);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE history (
    command_text TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    used_at REAL NOT NULL
);
"""

_MIGRATIONS = {
    # 1 -> 2: what proves a process is the job's (docs/security.md); NULL in older rows.
    1: (
        "ALTER TABLE jobs ADD COLUMN boot_id TEXT",
        "ALTER TABLE jobs ADD COLUMN session_id INTEGER",
        "ALTER TABLE jobs ADD COLUMN supervisor_session_id INTEGER",
        "ALTER TABLE jobs ADD COLUMN token TEXT",
    ),
    2: ("ALTER TABLE jobs ADD COLUMN slurm_job_id INTEGER",),  # 2 -> 3: a job sbatch runs
    3: ("ALTER TABLE jobs ADD COLUMN usage TEXT",),  # 3 -> 4: what it used (usage.py)
}

ADDED_COLUMNS = (
    # Starts in clock ticks since boot (/proc/PID/stat field 22): what proves a pid still
    # names them whatever the wall clock did. NULL: an older record, proven by start time.
    ("pid_start_ticks", "INTEGER"),
    ("supervisor_start_ticks", "INTEGER"),
)
"""Columns added without a new store version, so that the store stays readable both ways:
a gputop before them names every column it uses (and leaves these NULL), and a store it
created gets them when this gputop next writes it; readers take a missing one as NULL."""


JOBS = StoreKind(
    what="job store",
    version=SCHEMA_VERSION,
    schema=tuple(statement for statement in _SCHEMA.split(";") if statement.strip()),
    migrations=_MIGRATIONS,
    elsewhere=f"set {STATE_DIR_ENV}",
    repaired_by="a store is moved aside only once an integrity check under its lock proves "
    "it damaged, which the next command that records jobs (gputop run, a launch) does, "
    "keeping every job it can read.",
    busy_timeout_s=BUSY_TIMEOUT_S,
    rows=True,
    filled=lambda connection, path: _continue_ids_after(connection, path.parent / LOGS_DIR),
)


def open_connection(
    directory: Path, notices: list[str], *, repair: bool = False
) -> sqlite3.Connection:
    """A connection to ``directory``'s store, created or migrated as needed; what a person
    must be told goes to ``notices``. ``repair``: only commands that record jobs may prove a
    store damaged and move it aside (docs/sqlite.md, rules 4 and 5)."""
    dir_fd = open_private_dir(directory)
    try:
        os.close(open_private_subdir(dir_fd, directory, LOGS_DIR))
        with _open_lock(dir_fd, directory):
            return open_for_writing(
                JOBS,
                dir_fd,
                directory / DB_NAME,
                notices,
                repair=repair,
                salvage=lambda damaged, connection: carry_over(damaged, connection, directory),
                after=_add_missing_columns,
            )
    finally:
        os.close(dir_fd)


def open_read_only(directory: Path) -> sqlite3.Connection:
    """A read-only connection to ``directory``'s store where nothing can be written, with the
    checks of writing; it creates nothing (docs/faults.md, "Reading never needs writing")."""
    path = directory / DB_NAME
    dir_fd = open_private_dir(directory, create=False)
    try:
        if not prepare(JOBS, dir_fd, path, create=False):
            raise StoreError(f"There is no job store at {path}.")
        has_wal = False  # absent, or empty (left by a failed open)
        with contextlib.suppress(FileNotFoundError):
            has_wal = os.stat(DB_NAME + "-wal", dir_fd=dir_fd, follow_symlinks=False).st_size > 0
    finally:
        os.close(dir_fd)
    connection, _version = _open_read_only(
        JOBS, path, immutable=False, fall_back=lambda _error: not has_wal
    )
    try:
        version = check(JOBS, connection)
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"The job store {path} is store version {version}; this gputop reads "
                f"version {SCHEMA_VERSION}, and cannot migrate it while nothing can be "
                "written there."
            )
    except BaseException as error:
        connection.close()
        if isinstance(error, sqlite3.Error):
            raise cannot(JOBS, "read", path, error) from None
        raise
    return connection


def memory_connection() -> sqlite3.Connection:
    """An empty store in memory: what a read-only command sees where none was created."""
    connection = connect(JOBS, ":memory:")
    create(JOBS, connection, None)
    return connection


def store_identity(directory: Path) -> tuple[int, int] | None:
    """(device, inode) of the store file: it changes when the file is moved aside."""
    try:
        info = os.stat(directory / DB_NAME, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


@contextlib.contextmanager
def _open_lock(dir_fd: int, directory: Path) -> Iterator[None]:
    fd = open_private_file(dir_fd, directory, LOCK_NAME, os.O_RDWR, "job store lock file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _add_missing_columns(connection: sqlite3.Connection) -> None:
    """``ADDED_COLUMNS`` an older store lacks, in one transaction (checked again inside it:
    another process may add them meanwhile)."""
    if not _missing_columns(connection):
        return
    with immediate(connection):
        for name, kind in _missing_columns(connection):
            connection.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")


def _missing_columns(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    present = {row[1] for row in connection.execute("PRAGMA table_info(jobs)")}
    return [(name, kind) for name, kind in ADDED_COLUMNS if name not in present]


def _continue_ids_after(connection: sqlite3.Connection, logs_dir: Path) -> None:
    """After a store was moved aside, new ids continue after every id known (the old
    logs', the jobs carried over), so that a new job never appends to an old job's log."""
    highest = max(
        max(log_ids(logs_dir, logs_only=False), default=0),
        int(connection.execute("SELECT COALESCE(MAX(id), 0) FROM jobs").fetchone()[0]),
    )
    if highest:
        connection.execute("DELETE FROM sqlite_sequence WHERE name = 'jobs'")
        connection.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?)", (highest,))


# --- what a damaged store still holds -------------------------------------------------

REBUILT_NOTE = (
    "rebuilt from its log after the job store was damaged: its command and cards are not known"
)
"""A still running supervisor records its job again over such a row (JobStore.adopt)."""

MAX_LOG_ID_DIGITS = 18
"""A log named with more digits is no job's: ids stay below 2**63 (a log named 2**63-1 made
every launch fail as "disk is full"), and new ones follow."""


def carry_over(damaged: Path, connection: sqlite3.Connection, state_dir: Path) -> str:
    """Record in ``connection`` (the new, empty store) what ``damaged`` still holds, in one
    transaction; what was kept, for a person."""
    logs_dir = state_dir / LOGS_DIR
    ids = log_ids(logs_dir)
    job_rows: list[dict[str, object]] = []
    history_rows: list[dict[str, object]] = []
    unreadable = None
    try:
        old = connect(JOBS, f"file:{urllib.parse.quote(str(damaged))}?mode=ro", uri=True)
    except sqlite3.Error as error:
        old, unreadable = None, str(error)
    if old is not None:
        try:
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
    with immediate(connection):
        columns = [row[1] for row in connection.execute("PRAGMA table_info(jobs)")]
        kept = _insert_jobs(connection, job_rows, columns)
        rebuilt = _rebuild_from_logs(connection, logs_dir, ids, state_dir)
        _insert_history(connection, history_rows)
        _continue_ids_after(connection, logs_dir)
    jobs = f"{kept} job{'s' if kept != 1 else ''} read back from it"
    if rebuilt:
        jobs += f" and {rebuilt} rebuilt from their logs"
    text = f"{jobs} were kept in the new store"
    if unreadable:
        text += f" (nothing could be read from the damaged file: {unreadable})"
    return f"a new store was started: {text}. Job logs in {logs_dir} are untouched"


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
        connection.execute("SAVEPOINT carry")
        try:
            insert_row(connection, known, "INSERT OR IGNORE")
            again = connection.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone()
            row_to_job(again)
            kept += 1
        except Exception:
            connection.execute("ROLLBACK TO carry")
        connection.execute("RELEASE carry")
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


def _insert_history(connection: sqlite3.Connection, rows: list[dict[str, object]]) -> None:
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
