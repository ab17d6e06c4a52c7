"""One lifecycle for gputop's SQLite stores (the job store, the history store): each is a
``StoreKind`` (its name, schema, migrations) and queries of its own; everything else is here.

Opening: the files are checked private and never reached through a link
(private_files.check_store_file). A store that reads as damaged is checked again, and only
an integrity check under the store's lock may prove it damaged; then, where the caller
repairs, it is moved aside (never deleted), a new one is started and what the damaged one
still holds is carried over (the store's salvage hook). A store gputop did not write, or
one from a newer gputop, is refused and left untouched (``ForeignStoreError``, exit 2). Where
nothing can be written, a store is read ``mode=ro``, or immutable where SQLite cannot set up
its shared memory and the ``-wal`` is empty. The rules: docs/sqlite.md; the first of them:
gputop never opens and closes a descriptor of a database file (or its ``-wal``/``-shm``)
while a connection to it may exist in the process (check_store_file looks through ``O_PATH``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from gputop.core.private_files import Sharing, StoreError, check_store_file, os_cause
from gputop.core.records import frozen
from gputop.core.safe_text import clean
from gputop.core.write_faults import WriteFault, write_fault_of

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
CHECK_ATTEMPTS = 3
"""How often a store that reads as damaged is opened and checked again before anything is
done about it: a read error is retried, never taken as proof (docs/sqlite.md)."""
CHECK_PAUSE_S = 0.2
COMPANIONS = ("-wal", "-shm", "-journal")


@frozen(slots=False)
class StoreKind:
    """What one store is: its name in messages, its schema and how a person picks another."""

    what: str
    """``job store``: named so in every message."""
    version: int
    """The schema version this gputop writes (``PRAGMA user_version``)."""
    schema: Sequence[str]
    """The statements that make an empty store's tables (``create``)."""
    migrations: Mapping[int, Sequence[str]]
    """``migrations[N]`` takes version N to N+1."""
    elsewhere: str
    """How to use another store: ``give --db PATH``."""
    repaired_by: str
    """Who moves a damaged store aside, told to a reader that does not."""
    busy_timeout_s: float
    wal_limit: int | None = None
    """``journal_size_limit``: the size the ``-wal`` goes back to when it starts over."""
    rows: bool = False
    """Rows as ``sqlite3.Row``."""
    filled: Callable[[sqlite3.Connection, Path], None] | None = None
    """Runs in the transaction that creates a store on disk (given the store's path)."""


class ForeignStoreError(StoreError):
    """Not a store gputop writes (a negative version, someone else's tables): refused, left
    untouched."""

    exit_code = 2


def is_corruption(error: BaseException) -> bool:
    """The file is damaged or not a database (not: locked, full, read-only)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(error).lower()
    return "not a database" in text or "malformed" in text


def store_cause(kind: StoreKind, error: Exception, remedy: str = "; try again") -> str:
    """``error`` for a person: a store another process holds locked also says that gputop
    waited for it (``busy_timeout_s``), and ``remedy``."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return f"{error} by another process (waited {kind.busy_timeout_s:g} s){remedy}"
    return str(error)


def cannot(
    kind: StoreKind, doing: str, path: Path, error: Exception, fault: WriteFault | None = None
) -> StoreError:
    """``Cannot DOING the KIND PATH: why.``, for a person."""
    return StoreError(f"Cannot {doing} the {kind.what} {path}: {store_cause(kind, error)}.", fault)


def connect(kind: StoreKind, target: str, *, uri: bool = False) -> sqlite3.Connection:
    """A connection (autocommit; no SQL function with side effects from the schema)."""
    connection = sqlite3.connect(
        target, uri=uri, timeout=kind.busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        if kind.rows:
            connection.row_factory = sqlite3.Row
        connection.execute(f"PRAGMA busy_timeout = {int(kind.busy_timeout_s * 1000)}")
        connection.execute("PRAGMA trusted_schema = OFF")
    except BaseException:
        connection.close()
        raise
    return connection


def prepare(
    kind: StoreKind, dir_fd: int, path: Path, sharing: Sharing | None = None, *, create: bool = True
) -> bool:
    """Create (``create``) the store file, 0600 or as ``sharing`` says, if missing; check it
    and SQLite's companion files; True when it exists. A file we may not open is a
    permission problem, never damage."""
    name, directory = path.name, path.parent
    if not check_store_file(dir_fd, directory, name, kind.what, create=create, sharing=sharing):
        return False
    for suffix in COMPANIONS:  # removed as the last connection closes: one gone is absent
        what = f"{kind.what} file"
        check_store_file(dir_fd, directory, name + suffix, what, create=False, sharing=sharing)
    return True


def create(kind: StoreKind, connection: sqlite3.Connection, path: Path | None) -> None:
    """An empty store's tables, in one transaction (nothing where another process made them
    meanwhile); ``path`` ``None``: a store in memory, which ``kind.filled`` skips."""
    with immediate(connection):
        if user_version(connection) == 0:
            for statement in kind.schema:
                connection.execute(statement)
            if kind.filled is not None and path is not None:
                kind.filled(connection, path)
            connection.execute(f"PRAGMA user_version = {kind.version}")


def check(kind: StoreKind, connection: sqlite3.Connection) -> int:
    """The store's schema version; raises DatabaseError when the file is damaged."""
    version = user_version(connection)
    if 0 <= version <= kind.version:
        result = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
        if result != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
    return version


def open_for_writing(
    kind: StoreKind,
    dir_fd: int,
    path: Path,
    notices: list[str],
    *,
    repair: bool = True,
    sharing: Sharing | None = None,
    salvage: Callable[[Path, sqlite3.Connection], str] | None = None,
    after: Callable[[sqlite3.Connection], None] | None = None,
) -> sqlite3.Connection:
    """The store at ``path`` (in the checked directory ``dir_fd``), created or migrated.

    The caller holds the store's open lock. A store that reads as damaged is moved aside
    only where ``repair`` and an integrity check prove it (``salvage(damaged, new)`` then
    carries what it holds and says what it kept), and ``notices`` gets what a person must
    be told. ``after`` runs on every connection opened (columns added without a version)."""
    prepare(kind, dir_fd, path, sharing)
    try:
        connection, version, problem = _first_check(kind, path)
    except sqlite3.DatabaseError as error:
        raise _cannot_open(kind, path, error) from None
    if connection is None:
        proof = _proof(kind, path, problem) if repair else None
        if proof is None:
            raise StoreError(
                f"Cannot read the {kind.what} {path}: {problem}. It was left as it is: "
                + (
                    "an integrity check found it sound, so this was a passing error; try again."
                    if repair
                    else kind.repaired_by
                )
            )
        connection = _start_over(kind, dir_fd, path, proof, notices, sharing, salvage)
        version = kind.version
    try:
        refuse_foreign(kind, connection, path, version)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        if kind.wal_limit is not None:  # the -wal goes back to this size when it starts over
            connection.execute(f"PRAGMA journal_size_limit = {kind.wal_limit}")
        if version == 0:
            create(kind, connection, path)
        elif version < kind.version:
            migrate(connection, kind.migrations, kind.version)
        if after is not None:
            after(connection)
    except BaseException as error:
        connection.close()
        if isinstance(error, sqlite3.Error):
            raise _cannot_open(kind, path, error) from None
        raise
    return connection


def _start_over(
    kind: StoreKind,
    dir_fd: int,
    path: Path,
    proof: str,
    notices: list[str],
    sharing: Sharing | None,
    salvage: Callable[[Path, sqlite3.Connection], str] | None,
) -> sqlite3.Connection:
    """A damaged store moved aside and a new one started with what it still holds; where
    that fails, the damaged store goes back as it was: a new store without what the damaged
    one holds would read as sound, and everything in it would be forgotten."""
    try:
        target = move_aside(path)
    except OSError as error:
        raise StoreError(
            f"The {kind.what} {path} is damaged ({proof}) and could not be moved aside: "
            f"{os_cause(error)}. Move it away yourself to start a new store."
        ) from None
    try:
        prepare(kind, dir_fd, path, sharing)
        connection = connect(kind, str(path))
        try:
            create(kind, connection, path)
            kept = salvage(target, connection) if salvage else "a new, empty store was started"
        except BaseException:
            connection.close()
            raise
    except BaseException as error:
        failed = (
            f"The {kind.what} {path} is damaged ({proof}); starting a new store failed ({error})"
        )
        try:
            _put_back(target, path)
        except OSError as undo:
            raise StoreError(
                f"{failed}, and so did putting it back ({os_cause(undo)}): it is {target}. "
                f"Move it back to {path} (and its -wal), and try again."
            ) from None
        if not isinstance(error, (sqlite3.Error, OSError)):
            raise
        raise StoreError(
            f"{failed}, so it was put back as it was; it is tried again the next time.",
            write_fault_of(error, path.parent),
        ) from None
    notices.append(
        f"The {kind.what} {path} was damaged ({proof}); it was moved aside to {target} and {kept}."
    )
    return connection


def _proof(kind: StoreKind, path: Path, problem: str | None) -> str | None:
    """What ``PRAGMA integrity_check`` finds wrong, run inside a write transaction (no
    other process can change the store meanwhile); ``None``: the store is sound after all.

    The caller holds its store's exclusive open lock, so no other gputop is opening or
    repairing it. Only this proof may lead to a store being moved aside."""
    try:
        connection = connect(kind, str(path))
        try:
            connection.execute("BEGIN IMMEDIATE")
            found = [str(row[0]) for row in connection.execute("PRAGMA integrity_check(10)")]
        finally:
            connection.close()  # which rolls the transaction back
    except sqlite3.Error as error:
        if is_corruption(error):
            return str(error)
        raise StoreError(
            f"Cannot check the {kind.what} {path} ({problem}): {store_cause(kind, error)}. "
            "It was left as it is.",
            write_fault_of(error, path.parent),
        ) from None
    return None if found == ["ok"] else "integrity check: " + "; ".join(found[:3])


def _cannot_open(kind: StoreKind, path: Path, error: sqlite3.Error) -> StoreError:
    return cannot(kind, "open", path, error, write_fault_of(error, path.parent))


def open_read_only(
    kind: StoreKind, path: Path, *, immutable: bool, fall_back: Callable[[sqlite3.Error], bool]
) -> tuple[sqlite3.Connection, int]:
    """``path`` opened ``mode=ro`` (``immutable``: as a file nobody changes) and its version,
    refused as ``refuse_foreign`` says. Where opening fails and ``fall_back(error)``, it is
    opened immutable: SQLite could not create the shared memory file it reads a WAL store
    through, and with an empty ``-wal`` everything is in the main file (docs/faults.md)."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    try:
        try:
            connection, version = _opened(kind, uri + ("&immutable=1" if immutable else ""))
        except sqlite3.Error as error:
            if immutable or not fall_back(error):
                raise
            connection, version = _opened(kind, uri + "&immutable=1")
        refuse_foreign(kind, connection, path, version)
    except sqlite3.Error as error:
        raise cannot(kind, "read", path, error) from None
    return connection, version


def _opened(kind: StoreKind, uri: str) -> tuple[sqlite3.Connection, int]:
    """A connection to ``uri`` and the store's version (which opens the file now)."""
    connection = connect(kind, uri, uri=True)
    try:
        return connection, user_version(connection)
    except BaseException:
        connection.close()
        raise


def refuse_foreign(
    kind: StoreKind, connection: sqlite3.Connection, path: Path, version: int
) -> None:
    """``connection`` closed and an error raised where the store is not one this gputop may
    use: not a gputop store, written by a newer gputop, or changed by someone (a trigger or
    a view, which gputop never creates, would run its SQL with the user's rights)."""
    elsewhere = f"{kind.elsewhere} to use another store"
    try:
        if version < 0:
            raise ForeignStoreError(
                f"The {kind.what} {path} has store version {version}, which no gputop writes: "
                f"it is not a gputop store, or it was changed by hand. It was left untouched. "
                f"{elsewhere[:1].upper()}{elsewhere[1:]}."
            )
        if version > kind.version:
            raise StoreError(
                f"The {kind.what} {path} was written by a newer gputop (store version "
                f"{version}; this gputop reads up to {kind.version}). It was left untouched: "
                f"upgrade gputop, or {elsewhere}."
            )
        rows = connection.execute("SELECT type, name FROM sqlite_master").fetchall()
        found = ", ".join(
            f"{clean(str(row[0]))} {clean(str(row[1]))!r}"
            for row in rows
            if row[0] not in ("table", "index")
        )
        if found:
            raise StoreError(
                f"The {kind.what} {path} contains {found}, which gputop never creates: someone "
                "changed it. It was left untouched and nothing in it was run; move it away to "
                f"start a new store, or {elsewhere}."
            )
        if version == 0 and rows:  # someone else's database, never made a gputop store
            names = ", ".join(repr(clean(str(row[1]))) for row in rows[:5])
            raise ForeignStoreError(
                f"The {kind.what} {path} is a database gputop did not create (it holds "
                f"{names}). It was left untouched: move it away, or {elsewhere}."
            )
    except BaseException:
        connection.close()
        raise


def move_aside(path: Path) -> Path:
    """Rename a damaged store (and its ``-wal``/``-shm``) to ``NAME.corrupt-STAMP``; raises
    OSError where it cannot."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    os.rename(path, target)
    for suffix in COMPANIONS:
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{target}{suffix}")
    return target


def _put_back(target: Path, path: Path) -> None:
    """Undo ``move_aside``: the new store's files removed, the damaged one renamed back
    (the open lock is held: no other gputop opened the new one)."""
    for suffix in ("", *COMPANIONS):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    os.rename(target, path)
    for suffix in COMPANIONS:
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{target}{suffix}", f"{path}{suffix}")


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


def _first_check(kind: StoreKind, path: Path) -> tuple[sqlite3.Connection | None, int, str | None]:
    """Open and ``check`` a store, again up to CHECK_ATTEMPTS times while it reads as
    damaged: (connection, version, None), or (None, 0, what the last attempt said).

    Errors that are not damage (locked, full, no permission) are raised at once."""
    problem = ""
    for attempt in range(CHECK_ATTEMPTS):
        if attempt:
            time.sleep(CHECK_PAUSE_S * attempt)
        connection = connect(kind, str(path))
        try:
            return connection, check(kind, connection), None
        except BaseException as error:
            connection.close()
            if not is_corruption(error):
                raise
            problem = str(error)
    return None, 0, problem


def readable_rows(
    connection: sqlite3.Connection, table: str, more_ids: Iterable[int] = ()
) -> list[dict[str, object]]:
    """Every row of ``table`` (a rowid table) that a damaged store still returns, as
    ``{column: value}`` in rowid order; ``more_ids`` (known from elsewhere: the job logs)
    are looked up alone as well.

    Rows are read in runs forward by rowid, each until a damaged page; the next run starts
    at the first id a lookup (down the tree, by the pages still sound) reaches again, probed
    one by one and then by doubling steps, so the time grows with the rows and the damaged
    places (at most LINEAR_PROBES and 64 lookups each), never with how large the ids are."""
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
