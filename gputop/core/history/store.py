"""Opening the history store: for the recorder (created, checked, recovered) or read-only.

The store is one SQLite file in WAL mode, by default ``history.sqlite3`` in gputop's state
directory. The recorder opens it as the job store opens its own (jobs/store_file.py): the
directory and the files are checked to be the user's own and private, never reached through
a link (core/private_files.py); a damaged file is moved aside under a new name, never
deleted; a store written by a newer gputop is refused and left untouched. Readers (``gputop
report``, the dashboard) open it read-only: in WAL mode they never block the recorder.
See docs/history.md.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from gputop.core.errors import GputopError
from gputop.core.history.reading import check_for_reading, foreign_objects
from gputop.core.history.schema import SCHEMA_VERSION, create_schema, migrate
from gputop.core.private_files import (
    Sharing,
    StoreError,
    check_companion,
    check_store_file,
    default_state_dir,
    open_private_dir,
)
from gputop.core.sqlite_files import (
    first_check,
    move_aside,
    os_cause,
    proven_damage,
    refuse_foreign_version,
)
from gputop.core.write_faults import WriteFault, write_fault_of

TRUNCATE_AT = 4 * 1024 * 1024
"""The size the ``-wal`` goes back to when it starts over (``journal_size_limit``), and
past which the recorder truncates it once no reader holds it (wal_bound.py)."""

DB_NAME = "history.sqlite3"
HISTORY_DB_ENV = "GPUTOP_HISTORY_DB"
"""Where the history is read from by default (and recorded, without --db): a shared store
an admin runs, for every gputop of the machine (docs/history.md, "A shared store")."""
BUSY_TIMEOUT_S = 5.0
COMPANIONS = ("-wal", "-shm", "-journal")


class HistoryError(GputopError):
    """The history store cannot be used: the message names the path and the cause.

    ``fault`` is set when the cause is a full or read-only disk (write_faults.py): the
    recorder then keeps sampling and tries again (docs/faults.md).
    """

    def __init__(self, message: str, fault: WriteFault | None = None) -> None:
        super().__init__(message)
        self.fault = fault


def history_error(error: StoreError) -> HistoryError:
    """The private-files helpers' refusal, for the history store (its fault kept)."""
    return HistoryError(str(error), error.fault)


def default_history_path(environ: Mapping[str, str] = os.environ) -> Path:
    """``GPUTOP_HISTORY_DB``, else ``history.sqlite3`` in the state directory
    (``GPUTOP_STATE_DIR``, XDG, ``~/.local``)."""
    chosen = environ.get(HISTORY_DB_ENV, "")
    if chosen:
        return Path(os.path.abspath(chosen))
    return default_state_dir(environ) / DB_NAME


def open_for_recording(
    path: Path, notices: list[str], sharing: Sharing | None = None
) -> sqlite3.Connection:
    """A connection for the one recorder: the store created, migrated or recovered.

    Appends to ``notices`` what a person must be told (a damaged store moved aside).
    ``sharing``: a store others may read (``--readable-by``), else private.
    """
    path = Path(os.path.abspath(path))
    try:
        dir_fd = open_private_dir(path.parent, store="history store", sharing=sharing)
    except StoreError as error:
        raise history_error(error) from None
    try:
        _prepare_files(dir_fd, path, sharing)
        try:
            connection, version, problem = first_check(lambda: _sqlite(str(path)), _check)
            if connection is None:
                # Retried, and still damaged? Proven by an integrity check in a write
                # transaction (the recorder's lock is held: no other recorder), or left.
                proof = proven_damage(lambda: _sqlite(str(path)))
                if proof is None:
                    raise HistoryError(
                        f"Cannot read the history store {path}: {problem}. An integrity "
                        "check found it sound, so it was left as it is; try again."
                    )
                notices.append(_move_aside(path, proof))
                _prepare_files(dir_fd, path, sharing)
                connection = _sqlite(str(path))
                version = 0
        except sqlite3.DatabaseError as error:
            raise _cannot_open(path, error) from None
        _refuse_foreign(connection, path, version)
        _refuse_newer(connection, path, version)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            # the -wal goes back to this size when it starts over (wal_bound.py)
            connection.execute(f"PRAGMA journal_size_limit = {TRUNCATE_AT}")
            if version == 0:
                create_schema(connection)
            elif version < SCHEMA_VERSION:
                migrate(connection, version)
        except sqlite3.Error as error:
            connection.close()
            raise _cannot_open(path, error) from None
        return connection
    finally:
        os.close(dir_fd)


def open_for_reading(path: Path) -> sqlite3.Connection:
    """A read-only connection; an error naming the path when there is no usable store.

    The store may be another user's (a shared store): it is checked first (reading.py),
    opened ``mode=ro``, and this process creates nothing beside it that it cannot."""
    path = Path(os.path.abspath(path))
    try:
        info = check_for_reading(path, COMPANIONS)
    except GputopError as error:
        raise HistoryError(str(error)) from None
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    if info.st_uid != os.geteuid() and not os.path.lexists(f"{path}-wal"):
        # Another user's store, its recorder stopped: read the main file as it is, so that
        # even root creates no -shm beside it (docs/history.md, "A shared store").
        uri += "&immutable=1"
    try:
        connection, version = _read_only(uri)
    except sqlite3.Error as error:
        if write_fault_of(error, path.parent) is None or _wal_bytes(path) > 0:
            raise HistoryError(f"Cannot read the history store {path}: {error}.") from None
        # A full or read-only disk, or another user's store in a directory this user may
        # not write (SQLite says "readonly directory"), where SQLite cannot create the -shm
        # file it reads a WAL store through: with no -wal content everything is in the main
        # file, which no recorder is changing (docs/faults.md, docs/history.md).
        try:
            connection, version = _read_only(uri + "&immutable=1")
        except sqlite3.Error as second:
            raise HistoryError(f"Cannot read the history store {path}: {second}.") from None
    _refuse_foreign(connection, path, version)
    _refuse_newer(connection, path, version)
    try:
        found = foreign_objects(connection)
    except sqlite3.Error as error:
        connection.close()
        raise HistoryError(f"Cannot read the history store {path}: {error}.") from None
    if found:
        connection.close()
        raise HistoryError(
            f"The history store {path} contains {found}, which gputop never creates: someone "
            "changed it. Nothing in it was run."
        )
    if version < READABLE_FROM:
        connection.close()
        raise HistoryError(
            f"The history store {path} is empty or from an older gputop (version {version}): "
            "run 'gputop record' once to bring it up to date."
        )
    return connection


READABLE_FROM = 2
"""The oldest store version the report reads as it is: version 2 added the activity columns
the report's queries read (docs/activity.md), so a version 1 store is brought up to date
by 'gputop record' first. Version 3's Xids and health counters are read by ``report
--health`` alone, which asks a version 2 store to be brought up to date (HEALTH_FROM)."""
HEALTH_FROM = 3
"""The oldest store version with the Xids and health counters (schema.HEALTH_SCHEMA)."""


def _cannot_open(path: Path, error: sqlite3.Error) -> HistoryError:
    return HistoryError(
        f"Cannot open the history store {path}: {error}.", write_fault_of(error, path.parent)
    )


def _read_only(uri: str) -> tuple[sqlite3.Connection, int]:
    connection = sqlite3.connect(
        uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        return connection, int(connection.execute("PRAGMA user_version").fetchone()[0])
    except BaseException:
        connection.close()
        raise


def _wal_bytes(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal", follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


class ForeignHistoryError(HistoryError):
    """Not a store gputop writes (a negative version): refused, left untouched."""

    exit_code = 2


def _refuse_foreign(connection: sqlite3.Connection, path: Path, version: int) -> None:
    why = refuse_foreign_version(version, path, "history store")
    if why is not None:
        connection.close()
        raise ForeignHistoryError(f"{why} Give --db PATH to use another store.")


def _refuse_newer(connection: sqlite3.Connection, path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        connection.close()
        raise HistoryError(
            f"The history store {path} was written by a newer gputop (store version "
            f"{version}; this gputop reads up to {SCHEMA_VERSION}). It was left untouched: "
            "upgrade gputop, or give --db PATH to use another store."
        )


def _prepare_files(dir_fd: int, path: Path, sharing: Sharing | None = None) -> None:
    try:
        check_store_file(
            dir_fd, path.parent, path.name, "history store", create=True, sharing=sharing
        )
        for suffix in COMPANIONS:
            check_companion(dir_fd, path.parent, path.name + suffix, "history store file", sharing)
    except StoreError as error:
        raise history_error(error) from None


def _sqlite(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    connection.execute("PRAGMA trusted_schema = OFF")
    return connection


def _check(connection: sqlite3.Connection) -> int:
    """The store's schema version; raises DatabaseError when the file is damaged."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if 0 <= version <= SCHEMA_VERSION:
        result = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
        if result != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
        names = foreign_objects(connection)
        if names:  # gputop never creates a trigger or a view: someone else put it there
            raise HistoryError(
                f"The history store contains {names}, which gputop never creates: someone "
                "changed it. It was left untouched and nothing in it was run."
            )
    return version


def _move_aside(path: Path, problem: str) -> str:
    try:
        target = move_aside(path, COMPANIONS)
    except OSError as error:
        raise HistoryError(
            f"The history store {path} is damaged ({problem}) and could not be moved aside: "
            f"{os_cause(error)}. Move it away yourself to start a new store."
        ) from None
    return (
        f"The history store {path} was damaged ({problem}); it was moved aside to {target} "
        "and a new, empty store was started."
    )
