"""The job store's connection: one per store and process, shared by its threads.

Every write is one short ``BEGIN IMMEDIATE`` transaction (many processes write at once);
where nothing can be written it reads read-only (docs/faults.md); a read that SQLite answers
"malformed" is retried, never proof of damage, and a replaced store is followed (docs/sqlite.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from gputop.core.jobs.store_file import (
    DB_NAME,
    JOBS,
    LOGS_DIR,
    StoreError,
    default_state_dir,
    memory_connection,
    open_connection,
    open_read_only,
    store_identity,
)
from gputop.core.sqlite_files import CHECK_ATTEMPTS, CHECK_PAUSE_S, cannot, immediate, is_corruption
from gputop.core.write_faults import FaultReporter, WriteFault, fault_at, write_fault_of

WRITABLE_RETRY_S = 2.0
"""How often a store opened read-only (a full or read-only disk) tries to write again."""
FAULT_CONSEQUENCE = (
    "Jobs are read as recorded; jobs keep running, and stopping one still works. What "
    "cannot be recorded now (a job's end, a stop) is kept and recorded when space returns "
    "(docs/faults.md)."
)

_S = TypeVar("_S", bound="StoreConnection")


class _ReadsAsDamaged(StoreError):
    """A read that SQLite answered "malformed" or "not a database": retried, never proof."""


_OPEN: dict[Path, StoreConnection] = {}
"""The store open in this process, per state directory, shared by every ``open`` of it."""
_OPEN_LOCK = threading.Lock()


def _forget_open_stores() -> None:
    """In a forked child: the parent's stores are not its own (a SQLite connection must not
    cross a fork), and the registry's lock may have been held by a thread it did not get."""
    global _OPEN_LOCK
    _OPEN_LOCK = threading.Lock()
    _OPEN.clear()


os.register_at_fork(after_in_child=_forget_open_stores)


def _directory(state_dir: Path | str | None) -> Path:
    given = Path(state_dir) if state_dir is not None else default_state_dir()
    return given.expanduser().absolute()


class StoreConnection:
    """The store's connection, shared by threads; it closes when its last user closes it."""

    def __init__(self, state_dir: Path, connection: sqlite3.Connection, notices: list[str]):
        self.state_dir = state_dir
        self.db_path = state_dir / DB_NAME
        self.logs_dir = state_dir / LOGS_DIR
        self.notices = notices
        self._conn = connection
        self._lock = threading.RLock()
        self.host = socket.gethostname()
        """This machine: the host of the jobs it launches and judges."""
        self._file = store_identity(state_dir)
        self.in_memory = False
        self.faults = FaultReporter(
            f"the job store {self.db_path}", FAULT_CONSEQUENCE, notices.append
        )
        self._read_only = False
        self._writable_tried = 0.0
        self._notices_taken = 0
        self._users = 1
        self._pid = os.getpid()
        self._damaged = False
        """A read or write found the store damaged since the last connection: the next
        opening that may repair (a launch) checks it under the open lock."""

    @classmethod
    def open(cls: type[_S], state_dir: Path | str | None = None, *, repair: bool = False) -> _S:
        """The store, read-only where nothing can be written (said once in ``notices``);
        ``repair``: as open_connection's."""
        directory = _directory(state_dir)
        with _OPEN_LOCK:
            shared = cls._share(directory)
        if shared is not None:
            if repair and shared._damaged:  # a command that records jobs proves it
                try:
                    shared._repair()
                except BaseException:
                    shared.close()
                    raise
            return shared
        store = cls._open_new(directory, repair)
        with _OPEN_LOCK:
            other = cls._share(directory)  # another thread opened it meanwhile: one is enough
            if other is None:
                _OPEN[directory] = store
                return store
            store._close_connection()
            with other._lock:  # what this opening learnt (a store moved aside) is said
                other.notices.extend(store.notices)
            return other

    @classmethod
    def _share(cls: type[_S], directory: Path) -> _S | None:
        """The store this process has open there, with one more user (under _OPEN_LOCK)."""
        store = _OPEN.get(directory)
        if store is None or store._pid != os.getpid() or store._users <= 0:
            return None
        store._users += 1
        return store  # type: ignore[return-value]  # one class of store per directory

    @classmethod
    def _open_new(cls: type[_S], directory: Path, repair: bool) -> _S:
        notices: list[str] = []
        try:
            connection = open_connection(directory, notices, repair=repair)
        except StoreError as error:
            if error.fault is None or not os.path.lexists(directory / DB_NAME):
                raise
            try:
                connection = open_read_only(directory)
            except StoreError:
                raise error from None  # why it could not be opened says more (a repair)
            store = cls(directory, connection, notices)
            store._became_read_only(error.fault)
            return store
        store = cls(directory, connection, notices)
        fault = fault_at(directory)
        if fault is not None:  # said now, even if this command writes nothing
            store.faults.failed(fault)
        return store

    @property
    def writable(self) -> bool:
        return not self._read_only

    def take_notices(self) -> list[str]:
        """What a person must be told since the last call (each said once)."""
        with self._lock:
            taken = self.notices[self._notices_taken :]
            self._notices_taken = len(self.notices)
        return taken

    @classmethod
    def in_memory_store(cls: type[_S]) -> _S:
        """An empty store that writes nothing on disk (no store was ever created)."""
        store = cls(_directory(None), memory_connection(), [])
        store.in_memory = True
        store._file = None
        return store

    @classmethod
    def open_existing(cls: type[_S], state_dir: Path | str | None = None) -> _S | None:
        """The store if one was ever created, else ``None``: readers (``pick``, ``jobs``) must
        not create a state directory as a side effect."""
        directory = _directory(state_dir)
        plain_dir = os.path.isdir(directory) and not os.path.islink(directory)
        if not os.path.lexists(directory) or (
            plain_dir and not os.path.lexists(directory / DB_NAME)
        ):
            return None
        return cls.open(directory)  # refuses (names the problem) what is not usable

    def close(self) -> None:
        """This user is done; the connection closes with the last of them."""
        with _OPEN_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if _OPEN.get(self.state_dir) is self:
                del _OPEN[self.state_dir]
        self._close_connection()

    def _close_connection(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run a query; where reading needs a write SQLite cannot make (its ``-shm`` on a full
        disk), read again through a read-only connection."""
        for attempt in range(1, CHECK_ATTEMPTS + 1):
            try:
                with self._reading():
                    return list(self._conn.execute(sql, params).fetchall())
            except _ReadsAsDamaged:  # retried on a new connection, never proof of damage
                if attempt == CHECK_ATTEMPTS or self.in_memory:
                    raise
                time.sleep(CHECK_PAUSE_S * attempt)
                with self._lock:
                    self._use(self._read_only)
                    self._damaged = False
            except StoreError as error:
                if error.fault is None or self._read_only or self.in_memory or attempt > 1:
                    raise
                with self._lock:
                    self._became_read_only(error.fault, reconnect=True)
        raise AssertionError("unreachable")

    def _use(self, read_only: bool, *, repair: bool = False) -> None:
        """A new connection in place of this one: read-only, or for writing (``repair``: as
        open_connection's); where it cannot be opened, this one stays."""
        if read_only:
            connection = open_read_only(self.state_dir)
        else:
            connection = open_connection(self.state_dir, self.notices, repair=repair)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = connection
        self._file = store_identity(self.state_dir)
        self._read_only = read_only

    def _repair(self) -> None:
        with self._lock:
            if not self._damaged:
                return
            self._use(False, repair=True)
            self._damaged = False

    def _became_read_only(self, fault: WriteFault, *, reconnect: bool = False) -> None:
        if reconnect:
            self._use(True)
        self._read_only = True
        self._writable_tried = time.monotonic()
        self.faults.failed(fault)

    def _try_writable(self) -> None:
        """Open for writing again, at most every WRITABLE_RETRY_S."""
        if time.monotonic() - self._writable_tried < WRITABLE_RETRY_S:
            return
        self._writable_tried = time.monotonic()
        try:
            self._use(False)
        except StoreError as error:
            if error.fault is None:
                raise
            self.faults.failed(error.fault)

    def _follow_replacement(self) -> None:
        """Another process moved a damaged store aside: use the new one (a supervisor then
        records its job there again)."""
        if self._read_only:
            return  # nothing can be moved aside where nothing can be written
        if self._file is None or store_identity(self.state_dir) in (self._file, None):
            return
        self._use(False)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            self._follow_replacement()
            try:
                yield
            except sqlite3.Error as error:
                if is_corruption(error):
                    self._damaged = True
                    raise _ReadsAsDamaged(
                        f"Cannot read the job store {self.db_path}: {error}. It was left as "
                        "it is: a store is moved aside only once an integrity check under "
                        "its lock proves it damaged (docs/sqlite.md)."
                    ) from None
                fault = write_fault_of(error, self.state_dir)
                raise cannot(JOBS, "read", self.db_path, error, fault) from None

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._read_only:
                self._try_writable()
            fault = self.faults.fault
            if self._read_only and fault is not None:
                raise StoreError(
                    f"Cannot write the job store {self.db_path}: "
                    f"{fault.describe('the job store')}.",
                    fault,
                )
            self._follow_replacement()
            try:
                with immediate(self._conn):
                    yield self._conn
            except sqlite3.Error as error:
                raise self._write_error(error) from None
            self.faults.succeeded()

    def _write_error(self, error: sqlite3.Error) -> StoreError:
        """A failed write, for a person; a full or read-only disk is also said once."""
        fault = write_fault_of(error, self.state_dir)
        if fault is not None:
            self.faults.failed(fault)
        if is_corruption(error):
            self._damaged = True
        return cannot(JOBS, "write", self.db_path, error, fault)
