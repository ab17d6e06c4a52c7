"""The job store: one SQLite file per user, shared by every gputop and every supervisor.

Many processes write it at once (the CLI, dashboards, one supervisor per job), so it runs in
WAL mode with a long busy timeout, and every write is one short ``BEGIN IMMEDIATE``
transaction. It is private (directory 0700, files 0600): commands and paths say what a
person works on. It never loses data silently: a damaged file is moved aside, never deleted,
and one written by a newer gputop is refused and left as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gputop.core.errors import GputopError
from gputop.core.jobs.model import DEFAULT_GRACE_S, Job, JobState, RunMode
from gputop.core.jobs.store_file import (
    DB_NAME,
    LOGS_DIR,
    StoreError,
    default_state_dir,
    memory_connection,
    open_connection,
    open_read_only,
    store_identity,
)
from gputop.core.jobs.store_rows import (
    NEVER_STARTED_AFTER_S,
    column_text,
    current_jobs,
    job_columns,
    row_to_job,
    text_column,
)
from gputop.core.jobs.store_salvage import REBUILT_NOTE
from gputop.core.jobs.usage import JobUsage
from gputop.core.mig_targets import target_keys
from gputop.core.numbers import valid_text
from gputop.core.private_files import open_log_append
from gputop.core.process_control import current_boot_id
from gputop.core.safe_text import clean
from gputop.core.sqlite_files import CHECK_ATTEMPTS, CHECK_PAUSE_S, is_corruption
from gputop.core.write_faults import FaultReporter, WriteFault, fault_at, write_fault_of

__all__ = [
    "NEVER_STARTED_AFTER_S",
    "NOT_ENDED",
    "JobNotFound",
    "JobStore",
    "StoreError",
    "default_state_dir",
]

HISTORY_KEPT = 1000
WRITABLE_RETRY_S = 2.0
"""How often a store opened read-only (a full or read-only disk) tries to write again."""
FAULT_CONSEQUENCE = (
    "Jobs are read as recorded; jobs keep running, and stopping one still works. What "
    "cannot be recorded now (a job's end, a stop) is kept and recorded when space returns "
    "(docs/faults.md)."
)

_ACTIVE = (JobState.WAITING, JobState.RUNNING)
NOT_ENDED = (JobState.WAITING, JobState.RUNNING, JobState.LOST)
"""The states a job's end may still be recorded from."""


def _note(note: str | None) -> str | None:
    """A note as the store keeps it: valid UTF-8 (a path or a command it quotes may hold
    bytes that are not UTF-8, kept as ``\\xNN``); notes are for a person, never run."""
    return None if note is None else valid_text(note)


class JobNotFound(GputopError):
    """No job has that id."""


class _ReadsAsDamaged(StoreError):
    """A read that SQLite answered "malformed" or "not a database": retried, never proof."""


_OPEN: dict[Path, JobStore] = {}
"""The store open in this process, per state directory: every ``JobStore.open`` of the same
directory shares it (docs/sqlite.md: one connection per store per process)."""
_OPEN_LOCK = threading.Lock()


def _forget_open_stores() -> None:
    """In a forked child: the parent's stores are not its own (a SQLite connection must not
    cross a fork), and the registry's lock may have been held by a thread it did not get."""
    global _OPEN_LOCK
    _OPEN_LOCK = threading.Lock()
    _OPEN.clear()


os.register_at_fork(after_in_child=_forget_open_stores)


class JobStore:
    """Read and record jobs. Safe to share between threads; one per process and state
    directory (``open`` hands out the same one; it closes when its last user closes it)."""

    def __init__(self, state_dir: Path, connection: sqlite3.Connection, notices: list[str]):
        self.state_dir = state_dir
        self.db_path = state_dir / DB_NAME
        self.logs_dir = state_dir / LOGS_DIR
        self.notices = notices
        self._conn = connection
        self._lock = threading.RLock()
        self._host = socket.gethostname()
        self._file = store_identity(state_dir) if connection is not None else None
        self.in_memory = False
        self.faults = FaultReporter(
            f"the job store {self.db_path}", FAULT_CONSEQUENCE, notices.append
        )
        """Says once that the store cannot be written (and once that it can again)."""
        self._read_only = False
        self._writable_tried = 0.0
        self._notices_taken = 0
        self._users = 1
        self._pid = os.getpid()
        self._damaged = False
        """A read or write found the store damaged, and no new connection read it since:
        the next opening that may repair (a launch) checks it under the open lock."""

    @classmethod
    def open(cls, state_dir: Path | str | None = None, *, repair: bool = False) -> JobStore:
        """The store, for reading and writing; read-only where nothing can be written (a
        full disk, a read-only file system), which is said once in ``notices``.

        ``repair``: for commands that record jobs (a launch, a supervisor): a store that
        reads as damaged is checked under its lock, and moved aside only where the check
        proves it, keeping what it still holds (docs/sqlite.md). Readers never repair."""
        directory = Path(state_dir) if state_dir is not None else default_state_dir()
        directory = directory.expanduser().absolute()
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
            other = _OPEN.get(directory)
            if other is not None and other._pid == store._pid and other._users > 0:
                other._users += 1  # another thread opened it meanwhile: one is enough
                store._close_connection()
                with other._lock:  # what this opening learnt (a store moved aside) is said
                    other.notices.extend(store.notices)
                return other
            _OPEN[directory] = store
        return store

    @staticmethod
    def _share(directory: Path) -> JobStore | None:
        with _OPEN_LOCK:
            store = _OPEN.get(directory)
            if store is None or store._pid != os.getpid() or store._users <= 0:
                return None
            store._users += 1
            return store

    @classmethod
    def _open_new(cls, directory: Path, repair: bool) -> JobStore:
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
        """False while the store is open read-only (nothing can be written now)."""
        return not self._read_only

    def take_notices(self) -> list[str]:
        """What a person must be told since the last call (each said once)."""
        with self._lock:
            taken = self.notices[self._notices_taken :]
            self._notices_taken = len(self.notices)
        return taken

    @classmethod
    def in_memory_store(cls) -> JobStore:
        """An empty store that writes nothing on disk (no store was ever created)."""
        store = cls(default_state_dir().expanduser().absolute(), memory_connection(), [])
        store.in_memory = True
        store._file = None
        return store

    @classmethod
    def open_existing(cls, state_dir: Path | str | None = None) -> JobStore | None:
        """The store if one was ever created, else ``None``: for commands that only read
        (``pick``, ``jobs``), which must not create a state directory as a side effect."""
        directory = Path(state_dir) if state_dir is not None else default_state_dir()
        directory = directory.expanduser().absolute()
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

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------------

    def list_jobs(self) -> list[Job]:
        """Every job, oldest first; jobs whose supervisor vanished are marked lost first."""
        return current_jobs(self, self._select("SELECT * FROM jobs ORDER BY id"))

    def active_jobs(self) -> list[Job]:
        """Waiting or running jobs, oldest first."""
        return [job for job in self.list_jobs() if job.is_active]

    def get(self, job_id: int) -> Job:
        jobs = self._select("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not jobs:
            raise JobNotFound(f"There is no job {job_id}; `gputop jobs` lists them.")
        return current_jobs(self, jobs)[0]

    def reread(self, job_id: int) -> Job:
        """The job's row as the store holds it now, nothing applied."""
        return self._select("SELECT * FROM jobs WHERE id = ?", (job_id,))[0]

    @property
    def host(self) -> str:
        return self._host

    def history(self, limit: int = 200) -> list[str]:
        """Commands launched before, oldest first and newest last, each once."""
        rows = self._rows("SELECT command_text FROM history ORDER BY seq DESC LIMIT ?", (limit,))
        return [column_text(row[0]) for row in reversed(rows)]

    # --- writing -------------------------------------------------------------------------

    def create_job(
        self,
        *,
        name: str,
        command: Sequence[str],
        command_text: str,
        uses_shell: bool,
        cwd: str,
        physical_indices: Sequence[int],
        uuids: Sequence[str],
        env: Mapping[str, str],
        mode: RunMode = RunMode.DETACHED,
        grace_s: float = DEFAULT_GRACE_S,
        wait_for_free: bool = False,
        wait_count: int | None = None,
        wait_min_free_mib: int | None = None,
        wait_max_util_percent: int | None = None,
    ) -> Job:
        """Record a new job as waiting, and create its (empty, private) log."""
        with self._writing() as conn:
            cursor = conn.execute(
                "INSERT INTO jobs (name, command, command_text, uses_shell, cwd, "
                "physical_indices, uuids, env, mode, state, log_path, created_at, host, "
                "grace_s, wait_for_free, wait_count, wait_min_free_mib, wait_max_util_percent, "
                "boot_id, token) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    text_column(name),
                    json.dumps(list(command), allow_nan=False),
                    text_column(command_text),
                    int(uses_shell),
                    text_column(cwd),
                    json.dumps(list(physical_indices), allow_nan=False),
                    json.dumps(list(uuids), allow_nan=False),
                    json.dumps(dict(env), allow_nan=False),
                    mode.value,
                    JobState.WAITING.value,
                    time.time(),
                    self._host,
                    float(grace_s),
                    int(wait_for_free),
                    wait_count,
                    wait_min_free_mib,
                    wait_max_util_percent,
                    current_boot_id(),
                    secrets.token_hex(16),
                ),
            )
            job_id = int(cursor.lastrowid or 0)
            log_path = self.logs_dir / f"{job_id}.log"
            try:
                os.close(open_log_append(log_path))
            except OSError as error:
                raise StoreError(
                    f"Cannot create the job log {log_path}: {error.strerror or error}."
                ) from None
            conn.execute(
                "UPDATE jobs SET log_path = ? WHERE id = ?", (text_column(str(log_path)), job_id)
            )
        return self.get(job_id)

    def add_history(self, command_text: str) -> None:
        """Remember a command for the launch dialog; a repeat moves to the newest place."""
        text = command_text.strip()
        if not text:
            return
        with self._writing() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO history (command_text, seq, used_at) VALUES "
                "(?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM history), ?)",
                (text_column(text), time.time()),
            )
            conn.execute(
                "DELETE FROM history WHERE seq <= (SELECT MAX(seq) FROM history) - ?",
                (HISTORY_KEPT,),
            )

    def mark_supervisor(
        self,
        job_id: int,
        pid: int,
        start_time: float | None,
        session_id: int | None = None,
        start_ticks: int | None = None,
    ) -> None:
        """The job's supervisor is ``pid``: its start both as a time and in clock ticks
        since boot (``start_ticks``, what proves it after a step of the clock)."""
        self._update(
            job_id,
            "supervisor_pid = ?, supervisor_start_time = ?, supervisor_session_id = ?, "
            "supervisor_start_ticks = ?",
            (pid, start_time, session_id, start_ticks),
            states=None,
        )

    def set_note(self, job_id: int, note: str | None) -> None:
        self._update(job_id, "note = ?", (_note(note),))

    def set_gpus(
        self, job_id: int, physical_indices: Sequence[int], uuids: Sequence[str], env: Mapping
    ) -> None:
        """Fix the cards an ``--auto`` job waited for, once they were chosen."""
        self._update(
            job_id,
            "physical_indices = ?, uuids = ?, env = ?",
            (
                json.dumps(list(physical_indices), allow_nan=False),
                json.dumps(list(uuids), allow_nan=False),
                json.dumps(dict(env), allow_nan=False),
            ),
        )

    def set_usage(self, job_id: int, usage: JobUsage) -> None:
        """What the job used so far, as its supervisor measured it (usage_meter.py)."""
        self._update(job_id, "usage = ?", (usage.to_text(),), states=NOT_ENDED)

    def claim_cards(self, job_id: int) -> Job | None:
        """Move a waiting job to running unless a running job of this host holds its cards.

        Two jobs waiting for the same card both see it free at the same poll; only the
        first to claim it starts. Returns the job holding a card, or ``None`` when claimed.
        """
        with self._writing() as conn:
            mine = row_to_job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())
            for other in map(
                row_to_job,
                conn.execute(
                    "SELECT * FROM jobs WHERE state = ? AND id != ? AND host = ?",
                    (JobState.RUNNING.value, job_id, self._host),
                ).fetchall(),
            ):
                if target_keys(other.physical_indices, other.uuids) & target_keys(
                    mine.physical_indices, mine.uuids
                ):
                    return other
            conn.execute(
                "UPDATE jobs SET state = ? WHERE id = ? AND state = ?",
                (JobState.RUNNING.value, job_id, JobState.WAITING.value),
            )
        return None

    def mark_started(
        self,
        job_id: int,
        pid: int,
        pid_start_time: float | None,
        session_id: int | None = None,
        started_at: float | None = None,
        start_ticks: int | None = None,
    ) -> None:
        """Running as ``pid``; ``started_at`` is when it was spawned (default now), so its
        run time is never shorter than the process's own; ``start_ticks``: its start in
        clock ticks since boot (process_control.start_ticks)."""
        when = time.time() if started_at is None else started_at
        self._update(
            job_id,
            "state = ?, pid = ?, pid_start_time = ?, session_id = ?, started_at = ?, "
            "note = NULL, pid_start_ticks = ?",
            (JobState.RUNNING.value, pid, pid_start_time, session_id, when, start_ticks),
        )

    def adopt(self, job: Job) -> bool:
        """Record ``job`` again, as it was, in a store that has lost it (a damaged store
        was moved aside while it ran), in place of a row rebuilt from its log. False when
        its id is taken by another job."""
        columns = job_columns(job)
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        with self._writing() as conn:
            conn.execute(
                "DELETE FROM jobs WHERE id = ? AND token IS NULL AND note = ?",
                (job.id, REBUILT_NOTE),
            )
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO jobs ({names}) VALUES ({marks})", tuple(columns.values())
            )
            return cursor.rowcount > 0

    def insert_job(self, columns: Mapping[str, Any]) -> Job:
        """Record a new job from its columns: the names are the schema's, written in code
        (never from data), the values bound. For a job that runs outside gputop's
        supervisors: a Slurm job (slurm/job_rows.py)."""
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        with self._writing() as conn:
            cursor = conn.execute(
                f"INSERT INTO jobs ({names}) VALUES ({marks})", tuple(columns.values())
            )
            job_id = int(cursor.lastrowid or 0)
        return self.get(job_id)

    def update_job(
        self,
        job_id: int,
        assignments: str,
        values: tuple[Any, ...],
        *,
        states: Sequence[JobState] | None,
    ) -> None:
        """``UPDATE`` one job, only while it is in one of ``states`` (``None``: any state).
        ``assignments`` is the caller's own SQL, written in code (``"note = ?"``); every
        value is bound. For a job that runs outside gputop's supervisors (slurm/job_rows.py).
        """
        self._update(job_id, assignments, values, states=states)

    def has_job(self, job_id: int) -> bool:
        """Whether the store records this job (a row rebuilt from its log does not count:
        its supervisor records the job again over it)."""
        return bool(
            self._rows(
                "SELECT 1 FROM jobs WHERE id = ? AND NOT (token IS NULL AND note IS ?)",
                (job_id, REBUILT_NOTE),
            )
        )

    def mark_ended(
        self,
        job_id: int,
        *,
        exit_code: int | None = None,
        signal: int | None = None,
        note: str | None = None,
        stopped: bool | None = None,
        ended_at: float | None = None,
        usage: JobUsage | None = None,
    ) -> None:
        """Record how the job ended. Also ends a job taken as lost: the end is the truth.

        ``stopped``: whether a stop request ended it (``None``: leave as recorded). A job
        that ended by itself while a stop was on its way did not end because of it.
        ``ended_at``: when it ended, if not now (an end kept while the disk was full).
        ``usage``: what it used in all (``None``: leave as recorded).
        """
        stop_flag = "" if stopped is None else f", stop_requested = {int(stopped)}"
        self._update(
            job_id,
            "state = ?, exit_code = ?, signal = ?, note = COALESCE(?, note), ended_at = ?, "
            "usage = COALESCE(?, usage)" + stop_flag,
            (
                JobState.ENDED.value,
                exit_code,
                signal,
                _note(note),
                time.time() if ended_at is None else ended_at,
                usage.to_text() if usage is not None else None,
            ),
            states=NOT_ENDED,
        )

    def request_stop(self, job_id: int, grace_s: float | None = None) -> None:
        """Note that a person asked to stop the job (and the grace they gave)."""
        if grace_s is None:
            self._update(job_id, "stop_requested = 1", (), states=NOT_ENDED)
        else:
            self._update(
                job_id, "stop_requested = 1, grace_s = ?", (float(grace_s),), states=NOT_ENDED
            )

    def mark_lost(
        self, job_id: int, note: str, supervisor_pid: int | None, found_at: float | None = None
    ) -> bool:
        """Mark lost, unless the supervisor recorded an end (or was replaced) meanwhile.

        ``ended_at`` becomes when it was found lost (``found_at``, default now): the last
        moment gputop knew of it, so its run time stops growing. An end recorded later (its
        supervisor's kept end, ``jobs stop``) replaces it with the true one."""
        with self._writing() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET state = ?, note = ?, ended_at = COALESCE(ended_at, ?) "
                "WHERE id = ? AND state IN (?, ?) AND supervisor_pid IS ?",
                (
                    JobState.LOST.value,
                    _note(note),
                    time.time() if found_at is None else found_at,
                    job_id,
                    JobState.WAITING.value,
                    JobState.RUNNING.value,
                    supervisor_pid,
                ),
            )
            return cursor.rowcount > 0

    # --- internals -----------------------------------------------------------------------

    def _update(
        self,
        job_id: int,
        assignments: str,
        values: tuple[Any, ...],
        states: Sequence[JobState] | None = _ACTIVE,
    ) -> None:
        """``UPDATE`` one job, only while it is in one of ``states`` (``None``: any state)."""
        sql = f"UPDATE jobs SET {assignments} WHERE id = ?"
        params: tuple[Any, ...] = (*values, job_id)
        if states is not None:
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            params += tuple(state.value for state in states)
        with self._writing() as conn:
            conn.execute(sql, params)

    def _select(self, sql: str, params: tuple[Any, ...] = ()) -> list[Job]:
        jobs = []
        for row in self._rows(sql, params):
            try:
                jobs.append(row_to_job(row))
            except Exception as error:
                raise StoreError(
                    f"The job store {self.db_path} holds a row for job {row['id']} that no "
                    f"gputop wrote ({type(error).__name__}: {clean(str(error))[:200]}). It "
                    "was left as it is: someone changed it by hand; remove that row, or set "
                    "GPUTOP_STATE_DIR to use another store."
                ) from None
        return jobs

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run a query; where reading needs a write SQLite cannot make (its ``-shm`` file
        on a full disk), read again through a read-only connection."""
        for attempt in range(1, CHECK_ATTEMPTS + 1):
            try:
                with self._reading():
                    return list(self._conn.execute(sql, params).fetchall())
            except _ReadsAsDamaged:
                # A read error is retried on a new connection, never taken as proof of
                # damage: only a command that records jobs moves a store aside, after an
                # integrity check under the open lock (docs/sqlite.md).
                if attempt == CHECK_ATTEMPTS or self.in_memory:
                    raise
                time.sleep(CHECK_PAUSE_S * attempt)
                with self._lock:
                    self._reconnect()
            except StoreError as error:
                if error.fault is None or self._read_only or self.in_memory or attempt > 1:
                    raise
                with self._lock:
                    self._switch_to_read_only(error.fault)
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        """A new connection in place of one that read the store as damaged."""
        if self._read_only:
            connection = open_read_only(self.state_dir)
        else:
            connection = open_connection(self.state_dir, self.notices)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = connection
        self._file = store_identity(self.state_dir)
        self._damaged = False

    def _repair(self) -> None:
        """What ``open_connection`` does for a command that records jobs: the store
        checked under the open lock, moved aside only where the check proves it damaged,
        what it holds carried over (docs/sqlite.md); every user of this store then uses the
        new connection."""
        with self._lock:
            if not self._damaged:
                return
            connection = open_connection(self.state_dir, self.notices, repair=True)
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = connection
            self._file = store_identity(self.state_dir)
            self._read_only = False
            self._damaged = False

    def _became_read_only(self, fault: WriteFault) -> None:
        self._read_only = True
        self._writable_tried = time.monotonic()
        self.faults.failed(fault)

    def _switch_to_read_only(self, fault: WriteFault) -> None:
        connection = open_read_only(self.state_dir)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = connection
        self._became_read_only(fault)

    def _try_writable(self) -> None:
        """Opened read-only: open for writing again, at most every WRITABLE_RETRY_S."""
        if time.monotonic() - self._writable_tried < WRITABLE_RETRY_S:
            return
        self._writable_tried = time.monotonic()
        try:
            connection = open_connection(self.state_dir, self.notices)
        except StoreError as error:
            if error.fault is None:
                raise
            self.faults.failed(error.fault)
            return
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = connection
        self._read_only = False
        self._file = store_identity(self.state_dir)

    def _follow_replacement(self) -> None:
        """Another process moved a damaged store aside and started a new one: use the new
        one (a supervisor then records its job there again, see supervisor.py)."""
        if self._read_only:
            return  # nothing can be moved aside where nothing can be written
        if self._file is None or store_identity(self.state_dir) in (self._file, None):
            return
        connection = open_connection(self.state_dir, self.notices)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._conn = connection
        self._file = store_identity(self.state_dir)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            self._follow_replacement()
            try:
                yield
            except sqlite3.Error as error:
                if isinstance(error, sqlite3.DatabaseError) and is_corruption(error):
                    self._damaged = True
                    raise _ReadsAsDamaged(
                        f"Cannot read the job store {self.db_path}: {error}. It was left as "
                        "it is: a store is moved aside only once an integrity check under "
                        "its lock proves it damaged (docs/sqlite.md)."
                    ) from None
                raise StoreError(
                    f"Cannot read the job store {self.db_path}: {error}.",
                    write_fault_of(error, self.state_dir),
                ) from None

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
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise self._write_error(error) from None
            try:
                yield self._conn
            except sqlite3.Error as error:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise self._write_error(error) from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as error:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise self._write_error(error) from None
            self.faults.succeeded()

    def _write_error(self, error: sqlite3.Error) -> StoreError:
        """A failed write, for a person; a full or read-only disk is also said once."""
        fault = write_fault_of(error, self.state_dir)
        if fault is not None:
            self.faults.failed(fault)
        if isinstance(error, sqlite3.DatabaseError) and is_corruption(error):
            self._damaged = True
        return StoreError(f"Cannot write the job store {self.db_path}: {error}.", fault)
