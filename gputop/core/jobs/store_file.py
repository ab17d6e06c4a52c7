"""The job store's file: its schema, migrations and kind (sqlite_files.py has the lifecycle).

Never lose a job silently: opening is serialised by a lock file, so two processes never both
repair one store; a damaged store is moved aside only by a command that records jobs, with
what it still holds carried over (store_salvage.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from gputop.core.jobs.store_salvage import carry_over, log_ids
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
    check,
    connect,
    immediate,
    open_for_writing,
    prepare,
    user_version,
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
    create=lambda connection, path: _create_schema(connection, path.parent / LOGS_DIR),
    migrations=_MIGRATIONS,
    elsewhere=f"set {STATE_DIR_ENV}",
    repaired_by="a store is moved aside only once an integrity check under its lock proves "
    "it damaged, which the next command that records jobs (gputop run, a launch) does, "
    "keeping every job it can read.",
    busy_timeout_s=BUSY_TIMEOUT_S,
    rows=True,
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
                salvage=lambda damaged, connection: _carry(damaged, connection, directory),
                after=_add_missing_columns,
            )
    finally:
        os.close(dir_fd)


def _carry(damaged: Path, connection: sqlite3.Connection, directory: Path) -> str:
    with immediate(connection):
        carried = carry_over(damaged, connection, directory)
        _continue_ids_after(connection, directory / LOGS_DIR)
    return (
        f"a new store was started: {carried.describe()}. Job logs in {directory / LOGS_DIR} "
        "are untouched"
    )


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
            raise StoreError(f"Cannot read the job store {path}: {error}.") from None
        raise
    return connection


def memory_connection() -> sqlite3.Connection:
    """An empty store in memory: what a read-only command sees where none was created."""
    connection = connect(JOBS, ":memory:")
    _create_schema(connection, None)
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


def _create_schema(connection: sqlite3.Connection, logs_dir: Path | None) -> None:
    with immediate(connection):
        if user_version(connection) == 0:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            if logs_dir is not None:
                _continue_ids_after(connection, logs_dir)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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
