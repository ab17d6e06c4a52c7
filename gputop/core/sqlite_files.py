"""What gputop's two SQLite stores (the job store, the history store) do alike: tell a damaged
file from other errors, prove damage before acting on it, move a damaged store aside, read
what a damaged store still gives, run schema work in one transaction. Each store keeps its
own messages and schema (docs/sqlite.md, docs/security.md, docs/history.md).

The rules every store follows are in docs/sqlite.md; the first of them: gputop never opens
and closes a descriptor of a database file (or its ``-wal``/``-shm``) while a connection to
it may exist in the process (private_files.check_store_file looks through ``O_PATH``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
CHECK_ATTEMPTS = 3
"""How often a store that reads as damaged is opened and checked again before anything is
done about it: a read error is retried, never taken as proof (docs/sqlite.md)."""
CHECK_PAUSE_S = 0.2


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


def first_check(
    connect: Callable[[], sqlite3.Connection], check: Callable[[sqlite3.Connection], int]
) -> tuple[sqlite3.Connection | None, int, str | None]:
    """Open and ``check`` a store, again up to CHECK_ATTEMPTS times while it reads as
    damaged: (connection, version, None), or (None, 0, what the last attempt said).

    Errors that are not damage (locked, full, no permission) are raised at once."""
    problem = ""
    for attempt in range(CHECK_ATTEMPTS):
        if attempt:
            time.sleep(CHECK_PAUSE_S * attempt)
        connection = connect()
        try:
            return connection, check(connection), None
        except sqlite3.DatabaseError as error:
            connection.close()
            if not is_corruption(error):
                raise
            problem = str(error)
        except BaseException:
            connection.close()
            raise
    return None, 0, problem


def proven_damage(connect: Callable[[], sqlite3.Connection]) -> str | None:
    """What ``PRAGMA integrity_check`` finds wrong, run inside a write transaction (no
    other process can change the store meanwhile); ``None``: the store is sound.

    The caller holds its store's exclusive open lock, so no other gputop is opening or
    repairing it. Only this proof may lead to a store being moved aside."""
    connection = connect()
    try:
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as error:
            if is_corruption(error):
                return str(error)
            raise
        try:
            rows = connection.execute("PRAGMA integrity_check(10)").fetchall()
        except sqlite3.DatabaseError as error:
            if is_corruption(error):
                return str(error)
            raise
        finally:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        found = [str(row[0]) for row in rows]
        if found == ["ok"]:
            return None
        return "integrity check: " + "; ".join(found[:3])
    finally:
        connection.close()


def readable_rows(
    connection: sqlite3.Connection, table: str, more_ids: Iterable[int] = ()
) -> list[dict[str, object]]:
    """Every row of ``table`` (a rowid table) that a damaged store still returns, as
    ``{column: value}`` in rowid order.

    Rows are read in runs, forward by rowid, each until the end or a damaged page. Past a
    damaged page the next run starts at the first row a lookup reaches again (a lookup by
    rowid goes down the tree to the pages still sound): the next LINEAR_PROBES ids one by
    one, then doubling the step; the ids a doubled step skipped are read backwards, and
    what lies below where that stops is searched the same way. So the time grows with the
    rows and the damaged places (at most LINEAR_PROBES and 64 lookups each), never with how
    large the ids are. ``more_ids`` (ids
    known from elsewhere: the job logs) are looked up alone as well."""
    found: dict[int, dict[str, object]] = {}
    read: list[tuple[int, int]] = []
    _read_between(connection, table, found, _LOWEST_ROWID, _HIGHEST_ROWID, read)
    for rowid in sorted({int(value) for value in more_ids} - found.keys()):
        if _LOWEST_ROWID <= rowid <= _HIGHEST_ROWID and not any(
            low <= rowid <= high for low, high in read
        ):
            _read_run(connection, table, found, rowid, rowid, forward=True)
    return [found[rowid] for rowid in sorted(found)]


_LOWEST_ROWID = -(2**63)
_HIGHEST_ROWID = 2**63 - 1
LINEAR_PROBES = 4096
"""Ids looked up one by one past a damaged page before the step doubles: job ids follow one
another, so a sound page among damaged ones is found; far ones are reached by doubling."""


def _read_between(
    connection: sqlite3.Connection,
    table: str,
    found: dict[int, dict[str, object]],
    low: int,
    high: int,
    read: list[tuple[int, int]],
) -> None:
    """Every row with ``low <= rowid <= high`` that can still be read, into ``found``;
    the ranges read whole, with no damage, are added to ``read``."""
    while low <= high:
        last, whole = _read_run(connection, table, found, low, high, forward=True)
        if whole:
            read.append((low, high))
            return
        # the row that failed is the first after ``last`` (at or after ``low`` when none
        # was read): go on beyond it, so that every run makes progress
        start = (low if last is None else last) + 1
        if start > high:
            return
        probe, previous = start, start - 1
        while True:
            try:
                row = connection.execute(
                    f"SELECT rowid FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                    (probe,),
                ).fetchone()
            except sqlite3.DatabaseError:
                if probe >= high:
                    return
                gap = probe - start
                previous, probe = probe, min(probe + (1 if gap < LINEAR_PROBES else gap), high)
                continue
            break
        if probe > previous + 1:  # ids skipped between the last failed probe and this one:
            lowest, whole = _read_run(  # read backwards, and what lies below, once more
                connection, table, found, probe - 1, previous + 1, forward=False
            )
            if whole:
                read.append((previous + 1, probe - 1))
            else:
                below = probe if lowest is None else lowest
                _read_between(connection, table, found, previous + 1, below - 2, read)
        if row is None or int(row[0]) > high:
            return
        low = int(row[0])


def _read_run(
    connection: sqlite3.Connection,
    table: str,
    found: dict[int, dict[str, object]],
    start: int,
    end: int,
    *,
    forward: bool,
) -> tuple[int | None, bool]:
    """Rows from ``start`` to ``end`` (backwards: from ``start`` down to ``end``) into
    ``found``, until ``end`` or damage: (the last rowid read, whether it ended unharmed)."""
    low, high = (start, end) if forward else (end, start)
    last = None
    try:
        cursor = connection.execute(
            f"SELECT rowid, * FROM {table} WHERE rowid BETWEEN ? AND ? "
            f"ORDER BY rowid{'' if forward else ' DESC'}",
            (low, high),
        )
        names = [column[0] for column in cursor.description[1:]]
        for row in cursor:
            rowid, *values = tuple(row)
            found[rowid] = dict(zip(names, values, strict=True))
            last = rowid
    except sqlite3.DatabaseError:
        return last, False
    return last, True


def refuse_foreign_version(version: int, path: Path, store: str) -> str | None:
    """Why ``version`` cannot be a gputop store's (``None``: it can)."""
    if version < 0:
        return (
            f"The {store} {path} has store version {version}, which no gputop writes: it "
            "is not a gputop store, or it was changed by hand. It was left untouched."
        )
    return None
