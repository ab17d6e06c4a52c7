"""Opening the job store's file: a private directory, the schema, and recovery.

Whatever happens here must never lose a job silently. A file that is not a database (or is
damaged) is moved aside under a new name, never deleted, and a notice says where; a file
written by a newer gputop is refused and left exactly as it is; a directory that cannot be
used is an error naming the path and the cause. Opening is serialised across processes
with a lock file, so two processes never both "repair" the same store.

Nothing found in the directory is trusted (core/private_files.py checks ownership, links and
modes); a store with a trigger or a view, which gputop never creates, is refused (a planted
trigger would run SQL as the user on every write). A file that cannot be opened for lack of
permission is not damaged: that is reported, never "repaired". Older stores are migrated in
place (``_MIGRATIONS``), keeping every job.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from gputop.core.jobs.store_salvage import MAX_LOG_ID_DIGITS, carry_over
from gputop.core.numbers import is_ascii_digits
from gputop.core.private_files import (
    STATE_DIR_ENV,
    StoreError,
    StorePermissionError,
    check_companion,
    check_store_file,
    default_state_dir,
    open_private_dir,
    open_private_file,
    open_private_subdir,
)
from gputop.core.sqlite_files import (
    first_check,
    immediate,
    migrate,
    move_aside,
    os_cause,
    proven_damage,
    refuse_foreign_version,
    user_version,
)
from gputop.core.write_faults import write_fault_of

__all__ = ["STATE_DIR_ENV", "StoreError", "StorePermissionError", "default_state_dir"]

SCHEMA_VERSION = 4
DB_NAME = "jobs.sqlite3"
LOGS_DIR = "logs"
LOCK_NAME = "jobs.lock"
BUSY_TIMEOUT_S = 30.0
COMPANIONS = ("-wal", "-shm", "-journal")


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
    # version 1 -> 2: what proves a process is the job's (docs/security.md, part two). Jobs
    # recorded before have NULLs here; stop.py then relies on their start time alone
    # against this boot's start, and on the session being the job's pid.
    1: (
        "ALTER TABLE jobs ADD COLUMN boot_id TEXT",
        "ALTER TABLE jobs ADD COLUMN session_id INTEGER",
        "ALTER TABLE jobs ADD COLUMN supervisor_session_id INTEGER",
        "ALTER TABLE jobs ADD COLUMN token TEXT",
    ),
    # version 2 -> 3: a job submitted through sbatch (docs/slurm.md) is Slurm's to run;
    # its row records Slurm's job id. NULL for every job gputop runs itself.
    2: ("ALTER TABLE jobs ADD COLUMN slurm_job_id INTEGER",),
    # version 3 -> 4: what the job used, per card (usage.py, docs/history.md), as strict
    # JSON its supervisor writes while it runs. NULL: not measured (jobs of older versions).
    3: ("ALTER TABLE jobs ADD COLUMN usage TEXT",),
}

ADDED_COLUMNS = (
    # When the job's process and its supervisor started, in clock ticks since boot (field
    # 22 of /proc/PID/stat): what proves a pid still names them whatever the wall clock did
    # (process_control.py, docs/faults.md). NULL: recorded by a gputop before them, whose
    # jobs are proven by their start times, as before.
    ("pid_start_ticks", "INTEGER"),
    ("supervisor_start_ticks", "INTEGER"),
)
"""Columns added without a new store version, so that the store stays readable both ways:
a gputop before them reads and writes a store that has them (it names every column it
uses, and leaves these NULL in what it writes), and a store it created gets them when this
gputop next opens it for writing. Every reader takes a missing one as NULL (store_rows.py).
"""


def open_connection(
    directory: Path, notices: list[str], *, repair: bool = False
) -> sqlite3.Connection:
    """A connection to ``directory``'s store, created or migrated as needed.

    ``repair``: a store that reads as damaged is checked under the open lock and, where
    the check proves it, moved aside with what it still holds carried over (only commands
    that record jobs repair; a reader is refused with a message, docs/sqlite.md).
    Appends to ``notices`` what a person must be told (a damaged store moved aside).
    """
    dir_fd = open_private_dir(directory)
    try:
        os.close(open_private_subdir(dir_fd, directory, LOGS_DIR))
        with _open_lock(dir_fd, directory):
            return _connect(dir_fd, directory, notices, repair)
    finally:
        os.close(dir_fd)


def open_read_only(directory: Path) -> sqlite3.Connection:
    """A read-only connection to ``directory``'s existing store, for when nothing can be
    written there (a full disk, a read-only file system: docs/faults.md).

    It creates nothing: no directory, no lock file, no ``-wal``/``-shm`` where SQLite can
    do without them, and it forces no checkpoint. The same checks as for writing apply (a
    private directory, a regular file of ours, no trigger or view, not from a newer
    gputop). Where SQLite cannot set up its shared memory file (it would have to create
    it) and the ``-wal`` file is absent or empty, everything is in the main file: it is
    then opened as immutable.
    """
    path = directory / DB_NAME
    dir_fd = open_private_dir(directory, create=False)
    try:
        if not check_store_file(dir_fd, directory, DB_NAME, "job store", create=False):
            raise StoreError(f"There is no job store at {path}.")
        for suffix in COMPANIONS:
            check_companion(dir_fd, directory, DB_NAME + suffix, "job store file")
        has_wal = _size(dir_fd, DB_NAME + "-wal") > 0
    finally:
        os.close(dir_fd)
    uri = path.as_uri() + "?mode=ro"
    try:
        connection = _read_only_sqlite(uri)
    except sqlite3.Error as error:
        if has_wal:
            raise StoreError(f"Cannot read the job store {path}: {error}.") from None
        try:
            connection = _read_only_sqlite(uri + "&immutable=1")
        except sqlite3.Error as second:
            raise StoreError(f"Cannot read the job store {path}: {second}.") from None
    try:
        version = _check(connection)
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"The job store {path} is store version {version}; this gputop reads "
                f"version {SCHEMA_VERSION}, and cannot migrate it while nothing can be "
                "written there."
            )
        _refuse_foreign_objects(connection, path)
    except sqlite3.Error as error:
        connection.close()
        raise StoreError(f"Cannot read the job store {path}: {error}.") from None
    except BaseException:
        connection.close()
        raise
    return connection


def _read_only_sqlite(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(
        uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        connection.row_factory = sqlite3.Row
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opens it now
    except BaseException:
        connection.close()
        raise
    return connection


def _size(dir_fd: int, name: str) -> int:
    """Bytes in ``name`` (0 when absent: an empty ``-wal`` is left by a failed open)."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


def memory_connection() -> sqlite3.Connection:
    """An empty store in memory: what a read-only command sees where none was created."""
    connection = _sqlite(":memory:")
    _create_schema(connection, None)
    return connection


def store_identity(directory: Path) -> tuple[int, int] | None:
    """(device, inode) of the store file now: it changes when the file is moved aside."""
    try:
        info = os.stat(directory / DB_NAME, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


@contextlib.contextmanager
def _open_lock(dir_fd: int, directory: Path) -> Iterator[None]:
    """Serialise opening (schema creation, moving a damaged file aside) across processes."""
    fd = open_private_file(dir_fd, directory, LOCK_NAME, os.O_RDWR, "job store lock file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _connect(dir_fd: int, directory: Path, notices: list[str], repair: bool) -> sqlite3.Connection:
    """Under the open lock: the store checked (again, while it reads as damaged), and moved
    aside only where ``repair`` and an integrity check prove it damaged (docs/sqlite.md)."""
    path = directory / DB_NAME
    _prepare_files(dir_fd, directory)
    try:
        connection, version, problem = first_check(lambda: _sqlite(str(path)), _check)
    except sqlite3.DatabaseError as error:
        raise StoreError(
            f"Cannot open the job store {path}: {error}.", write_fault_of(error, directory)
        ) from None
    if connection is None:
        proof = _proof(path, problem, directory) if repair else None
        if proof is None:
            raise StoreError(
                f"Cannot read the job store {path}: {problem}. It was left as it is: "
                + (
                    "an integrity check found it sound, so this was a passing error; try again."
                    if repair
                    else "a store is moved aside only once an integrity check under its "
                    "lock proves it damaged, which the next command that records jobs "
                    "(gputop run, a launch) does, keeping every job it can read."
                )
            )
        target = _move_aside(path, proof)
        try:
            _prepare_files(dir_fd, directory)
            connection = _sqlite(str(path))
            try:
                _create_schema(connection, directory / LOGS_DIR)
                with immediate(connection):
                    carried = carry_over(target, connection, directory)
                    _continue_ids_after(connection, directory / LOGS_DIR)
            except BaseException:
                connection.close()
                raise
        except BaseException as error:
            # a new store without what the damaged one holds would read as sound, and every
            # job would be forgotten: the damaged store goes back, as it was
            try:
                _put_back(target, path)
            except OSError as undo:
                raise StoreError(
                    f"The job store {path} is damaged ({proof}); carrying what it holds into "
                    f"a new store failed ({error}), and so did putting it back ({os_cause(undo)})"
                    f": it is {target}. Move it back to {path} (and its -wal), and run the "
                    "command again."
                ) from None
            if not isinstance(error, (sqlite3.Error, OSError)):
                raise
            raise StoreError(
                f"The job store {path} is damaged ({proof}); carrying what it holds into a "
                f"new store failed ({error}), so it was put back as it was. The next command "
                "that records jobs tries again.",
                write_fault_of(error, directory),
            ) from None
        notices.append(
            f"The job store {path} was damaged ({proof}); it was moved aside to {target} and "
            f"a new store was started: {carried.describe()}. Job logs in "
            f"{directory / LOGS_DIR} are untouched."
        )
        version = SCHEMA_VERSION
    foreign = refuse_foreign_version(version, path, "job store")
    if foreign is not None:
        connection.close()
        raise ForeignStoreError(f"{foreign} Set {STATE_DIR_ENV} to use another store.")
    if version > SCHEMA_VERSION:
        connection.close()
        raise StoreError(
            f"The job store {path} was written by a newer gputop (store version {version}; "
            f"this gputop reads up to {SCHEMA_VERSION}). It was left untouched: upgrade "
            f"gputop, or set {STATE_DIR_ENV} to use another store."
        )
    try:
        _refuse_foreign_objects(connection, path)
        if version == 0:
            _refuse_foreign_tables(connection, path)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        if version == 0:
            _create_schema(connection, directory / LOGS_DIR)
        elif version < SCHEMA_VERSION:
            migrate(connection, _MIGRATIONS, SCHEMA_VERSION)
        _add_missing_columns(connection)
    except sqlite3.Error as error:
        connection.close()
        raise StoreError(
            f"Cannot open the job store {path}: {error}.", write_fault_of(error, directory)
        ) from None
    except BaseException:
        connection.close()
        raise
    return connection


def _add_missing_columns(connection: sqlite3.Connection) -> None:
    """``ADDED_COLUMNS`` that a store from an earlier gputop lacks, added in one transaction
    (another process may add them meanwhile: the check is made again inside it)."""
    if not _missing_columns(connection):
        return
    with immediate(connection):
        for name, kind in _missing_columns(connection):
            connection.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")


def _missing_columns(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    present = {row[1] for row in connection.execute("PRAGMA table_info(jobs)")}
    return [(name, kind) for name, kind in ADDED_COLUMNS if name not in present]


def _proof(path: Path, problem: str | None, directory: Path) -> str | None:
    """The integrity check's finding, or ``None`` where the store is sound after all."""
    try:
        return proven_damage(lambda: _sqlite(str(path)))
    except sqlite3.Error as error:
        raise StoreError(
            f"Cannot check the job store {path} ({problem}): {error}. It was left as it is.",
            write_fault_of(error, directory),
        ) from None


class ForeignStoreError(StoreError):
    """The file is a SQLite database gputop did not write: refused, left untouched."""

    exit_code = 2


def _refuse_foreign_tables(connection: sqlite3.Connection, path: Path) -> None:
    """Version 0 with tables in it: someone else's database, never made a job store."""
    names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
    if names:
        raise ForeignStoreError(
            f"The job store {path} is a database gputop did not create (it holds "
            f"{', '.join(repr(name) for name in names[:5])}). It was left untouched: move it "
            f"away, or set {STATE_DIR_ENV} to use another store."
        )


def _prepare_files(dir_fd: int, directory: Path) -> None:
    """Create the store file 0600 if missing; check it and SQLite's companion files.

    A file we may not open is a permission problem (StorePermissionError), never damage.
    """
    check_store_file(dir_fd, directory, DB_NAME, "job store", create=True)
    for suffix in COMPANIONS:
        check_companion(dir_fd, directory, DB_NAME + suffix, "job store file")


def _refuse_foreign_objects(connection: sqlite3.Connection, path: Path) -> None:
    """gputop creates tables and indexes only: a trigger or view was put there by someone
    else, and a trigger would run its SQL with the user's rights on every write."""
    rows = connection.execute(
        "SELECT type, name FROM sqlite_master WHERE type NOT IN ('table', 'index')"
    ).fetchall()
    if rows:
        found = ", ".join(f"{kind} {name!r}" for kind, name in rows)
        raise StoreError(
            f"The job store {path} contains {found}, which gputop never creates: someone "
            "changed it. It was left untouched and nothing in it was run; move it away to "
            f"start a new store, or set {STATE_DIR_ENV} to use another."
        )


def _sqlite(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    # No SQL function with side effects from the schema (triggers, views, defaults).
    connection.execute("PRAGMA trusted_schema = OFF")
    return connection


def _check(connection: sqlite3.Connection) -> int:
    """The store's schema version; raises DatabaseError when the file is damaged."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if 0 <= version <= SCHEMA_VERSION:
        result = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
        if result != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
    return version


def _put_back(target: Path, path: Path) -> None:
    """Undo ``_move_aside``: the new store's files removed, the damaged one renamed back
    (the open lock is held: no other gputop opened the new one)."""
    for suffix in ("", *COMPANIONS):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    os.rename(target, path)
    for suffix in COMPANIONS:
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{target}{suffix}", f"{path}{suffix}")


def _move_aside(path: Path, problem: str) -> Path:
    try:
        return move_aside(path, COMPANIONS)
    except OSError as error:
        raise StoreError(
            f"The job store {path} is damaged ({problem}) and could not be moved aside: "
            f"{os_cause(error)}. Move it away yourself to start a new store."
        ) from None


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
        _highest_log_id(logs_dir),
        int(connection.execute("SELECT COALESCE(MAX(id), 0) FROM jobs").fetchone()[0]),
    )
    if highest:
        connection.execute("DELETE FROM sqlite_sequence WHERE name = 'jobs'")
        connection.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?)", (highest,))


def _highest_log_id(logs_dir: Path) -> int:
    """The highest id a job log is named after. At most 18 digits: an id SQLite can still
    count on from (a log named 2**63-1 made every launch fail as "disk is full")."""
    highest = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(logs_dir):
            stem = entry.name.split(".", 1)[0]
            if is_ascii_digits(stem) and len(stem) <= MAX_LOG_ID_DIGITS:
                highest = max(highest, int(stem))
    return highest
