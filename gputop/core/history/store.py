"""The history store's kind (core/sqlite_files.py) and its two ways in: for the recorder
(created, checked, recovered) or read-only.

The store is one SQLite file in WAL mode, by default ``history.sqlite3`` in gputop's state
directory. The recorder opens it as the job store opens its own (the lifecycle and its rules
are sqlite_files.py's; the recorder's lock is held: no other recorder opens it meanwhile).
Readers (``gputop report``, the dashboard) open it read-only: in WAL mode they never block
the recorder, and the store may be another user's (reading.py). See docs/history.md.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from gputop.core import settings
from gputop.core.errors import GputopError
from gputop.core.history.reading import check_for_reading
from gputop.core.history.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION
from gputop.core.private_files import Sharing, default_state_dir, open_private_dir
from gputop.core.private_files import StoreError as HistoryError
from gputop.core.sqlite_files import COMPANIONS, StoreKind, open_for_writing, open_read_only
from gputop.core.write_faults import write_fault_of

__all__ = ["COMPANIONS", "HistoryError"]

TRUNCATE_AT = 4 * 1024 * 1024
"""The size the ``-wal`` goes back to when it starts over (``journal_size_limit``), and
past which the recorder truncates it once no reader holds it (wal_bound.py)."""

DB_NAME = "history.sqlite3"
BUSY_TIMEOUT_S = 5.0
HISTORY = StoreKind(
    what="history store",
    version=SCHEMA_VERSION,
    schema=SCHEMA,
    migrations=MIGRATIONS,
    elsewhere="give --db PATH",
    repaired_by="the recorder moves it aside once an integrity check proves it damaged.",
    busy_timeout_s=BUSY_TIMEOUT_S,
    wal_limit=TRUNCATE_AT,
)


def default_history_path() -> Path:
    """``settings.HISTORY_DB`` (a shared store an admin runs, for every gputop of the
    machine: docs/history.md, "A shared store"), else ``history.sqlite3`` in the state
    directory (``settings.STATE_DIR``, XDG, ``~/.local``)."""
    chosen = settings.HISTORY_DB.read()
    if chosen:
        return Path(os.path.abspath(chosen))
    return default_state_dir() / DB_NAME


def open_for_recording(
    path: Path, notices: list[str], sharing: Sharing | None = None
) -> sqlite3.Connection:
    """A connection for the one recorder: the store created, migrated or recovered.

    Appends to ``notices`` what a person must be told (a damaged store moved aside).
    ``sharing``: a store others may read (``--readable-by``), else private.
    """
    path = Path(os.path.abspath(path))
    dir_fd = open_private_dir(path.parent, store=HISTORY.what, sharing=sharing)
    try:
        return open_for_writing(HISTORY, dir_fd, path, notices, sharing=sharing)
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
    connection, version = open_read_only(
        HISTORY,
        path,
        # Another user's store, its recorder stopped: read the main file as it is, so that
        # even root creates no -shm beside it (docs/history.md, "A shared store").
        immutable=info.st_uid != os.geteuid() and not os.path.lexists(f"{path}-wal"),
        # A full or read-only disk, or another user's store in a directory this user may
        # not write (SQLite says "readonly directory"), where SQLite cannot create its -shm:
        # with no -wal content nothing is changing the main file (docs/faults.md).
        fall_back=lambda error: (
            write_fault_of(error, path.parent) is not None and _wal_bytes(path) == 0
        ),
    )
    if version < READABLE_FROM:
        connection.close()
        raise HistoryError(
            f"The history store {path} is empty or from an older gputop (version {version}): "
            "run 'gputop record' once to bring it up to date."
        )
    # A text that is not UTF-8 (a shared store is its owner's to write) is that text's
    # fault, read with replacement characters: SQLite's own decoding stops the whole read.
    connection.text_factory = lambda data: data.decode("utf-8", "replace")
    return connection


READABLE_FROM = 2
"""The oldest store version the report reads as it is: version 2 added the activity columns
the report's queries read (docs/activity.md), so a version 1 store is brought up to date
by 'gputop record' first. Version 3's Xids and health counters are read by ``report
--health`` alone, which asks a version 2 store to be brought up to date (HEALTH_FROM)."""
HEALTH_FROM = 3
"""The oldest store version with the Xids and health counters (schema.HEALTH_SCHEMA)."""


def _wal_bytes(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal", follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0
