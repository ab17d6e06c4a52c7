"""What gputop's two SQLite stores (the job store, the history store) do alike: tell a damaged
file from other errors, move a damaged store aside, run schema work in one transaction.
Each store keeps its own messages and schema (docs/security.md, docs/history.md)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def is_corruption(error: sqlite3.DatabaseError) -> bool:
    """The file is damaged or not a database (not: locked, full, read-only)."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "not a database" in text or "malformed" in text


def os_cause(error: OSError) -> str:
    """``no space left on device``: the system's words for a message's end."""
    return error.strerror.lower() if error.strerror else str(error)


def move_aside(path: Path, companions: Sequence[str]) -> Path:
    """Rename a damaged store (and its ``-wal``/``-shm``) to ``NAME.corrupt-STAMP``; raises
    OSError where it cannot."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    os.rename(path, target)
    for suffix in companions:
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{target}{suffix}")
    return target


@contextlib.contextmanager
def immediate(connection: sqlite3.Connection) -> Iterator[None]:
    """One write transaction taken at once: committed, or rolled back on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def migrate(
    connection: sqlite3.Connection, migrations: Mapping[int, Sequence[str]], target: int
) -> None:
    """Bring an older store up to ``target`` in one transaction, keeping every row;
    ``migrations[N]`` takes version N to N+1."""
    with immediate(connection):
        for step in range(user_version(connection), target):
            for statement in migrations[step]:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {target}")
