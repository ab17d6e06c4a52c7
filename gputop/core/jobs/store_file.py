"""Opening the job store's file: a private directory, the schema, and recovery.

Whatever happens here must never lose a job silently. A file that is not a database (or is
damaged) is moved aside under a new name, never deleted, and a notice says where; a file
written by a newer gputop is refused and left exactly as it is; a directory that cannot be
used is an error naming the path and the cause. Opening is serialised across processes
with a lock file, so two processes never both "repair" the same store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from gputop.core.errors import GputopError
from gputop.core.jobs.logs import PRIVATE_FILE_MODE

SCHEMA_VERSION = 1
DB_NAME = "jobs.sqlite3"
LOGS_DIR = "logs"
LOCK_NAME = "jobs.lock"
BUSY_TIMEOUT_S = 30.0
STATE_DIR_ENV = "GPUTOP_STATE_DIR"

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26

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
    stop_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE history (
    command_text TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    used_at REAL NOT NULL
);
"""


class StoreError(GputopError):
    """The job store cannot be used: the message names the path and the cause."""


def default_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$GPUTOP_STATE_DIR``, else ``$XDG_STATE_HOME/gputop``, else ``~/.local/state/gputop``."""
    explicit = environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return Path(xdg) / "gputop"
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".local" / "state" / "gputop"


def open_connection(directory: Path, notices: list[str]) -> sqlite3.Connection:
    """A connection to ``directory``'s store, created or recovered as needed.

    Appends to ``notices`` what a person must be told (a damaged store moved aside).
    """
    _private_dir(directory)
    _private_dir(directory / LOGS_DIR)
    with _open_lock(directory):
        return _connect(directory, notices)


def _cause(error: OSError) -> str:
    return error.strerror.lower() if error.strerror else str(error)


def _private_dir(path: Path) -> None:
    """Create ``path`` 0700 (or tighten it, when it is ours), and check it is usable."""
    advice = f"set {STATE_DIR_ENV} (or XDG_STATE_HOME) to a writable directory"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except FileExistsError:
        raise StoreError(
            f"Cannot use {path} for the job store: it is not a directory; {advice}."
        ) from None
    except OSError as error:
        raise StoreError(
            f"Cannot create the job store directory {path}: {_cause(error)}; {advice}."
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"Cannot use {path} for the job store: it is not a directory; {advice}.")
    private = stat.S_IMODE(info.st_mode) & 0o700  # take from others, never add for the owner
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != private:
        with contextlib.suppress(OSError):
            os.chmod(path, private)
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise StoreError(f"The job store directory {path} is not writable by you; {advice}.")


@contextlib.contextmanager
def _open_lock(directory: Path) -> Iterator[None]:
    """Serialise opening (schema creation, moving a damaged file aside) across processes."""
    path = directory / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except OSError as error:
        raise StoreError(f"Cannot use the job store in {directory}: {_cause(error)}.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _connect(directory: Path, notices: list[str]) -> sqlite3.Connection:
    path = directory / DB_NAME
    problem = _prepare_file(path)
    connection = None
    if problem is None:
        connection = _sqlite(path)
        try:
            version = _check(connection)
        except sqlite3.DatabaseError as error:
            connection.close()
            if not _is_corruption(error):
                raise StoreError(f"Cannot open the job store {path}: {error}.") from None
            problem = str(error)
    if problem is not None:
        notices.append(_move_aside(path, problem, directory / LOGS_DIR))
        _prepare_file(path)
        connection = _sqlite(path)
        version = 0
    assert connection is not None
    if version > SCHEMA_VERSION:
        connection.close()
        raise StoreError(
            f"The job store {path} was written by a newer gputop (store version {version}; "
            f"this gputop reads up to {SCHEMA_VERSION}). It was left untouched: upgrade "
            f"gputop, or set {STATE_DIR_ENV} to use another store."
        )
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        if version == 0:
            _create_schema(connection, directory / LOGS_DIR)
    except sqlite3.Error as error:
        connection.close()
        raise StoreError(f"Cannot open the job store {path}: {error}.") from None
    return connection


def _prepare_file(path: Path) -> str | None:
    """Create the store file 0600 if missing. Returns why it is unusable, if it is."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except PermissionError as error:
        return f"it could not be opened: {_cause(error)}"
    except OSError as error:
        raise StoreError(f"Cannot open the job store {path}: {_cause(error)}.") from None
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != PRIVATE_FILE_MODE:
            os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return None


def _sqlite(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    return connection


def _check(connection: sqlite3.Connection) -> int:
    """The store's schema version; raises DatabaseError when the file is damaged."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version <= SCHEMA_VERSION:
        result = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
        if result != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
    return version


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "not a database" in text or "malformed" in text


def _move_aside(path: Path, problem: str, logs_dir: Path) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    try:
        os.rename(path, target)
        for suffix in ("-wal", "-shm", "-journal"):
            companion = Path(f"{path}{suffix}")
            if companion.exists():
                os.rename(companion, f"{target}{suffix}")
    except OSError as error:
        raise StoreError(
            f"The job store {path} is damaged ({problem}) and could not be moved aside: "
            f"{_cause(error)}. Move it away yourself to start a new store."
        ) from None
    return (
        f"The job store {path} was damaged ({problem}); it was moved aside to {target} and "
        f"a new, empty store was started. Job logs in {logs_dir} are untouched."
    )


def _create_schema(connection: sqlite3.Connection, logs_dir: Path) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        if int(connection.execute("PRAGMA user_version").fetchone()[0]) == 0:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            # After a store was moved aside, new ids continue after the old logs' ids so
            # that a new job never appends to an old job's log.
            highest = _highest_log_id(logs_dir)
            if highest:
                connection.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?)", (highest,)
                )
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def _highest_log_id(logs_dir: Path) -> int:
    highest = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(logs_dir):
            stem = entry.name.split(".", 1)[0]
            if stem.isdigit():
                highest = max(highest, int(stem))
    return highest
