"""Writing samples into the history store: in batches, one transaction each.

``flush`` writes what ``add`` gathered in one transaction, so a SIGKILL loses at most the
samples since the last flush. A write that fails keeps the samples pending (up to
``max_pending``, then the oldest go) for the next flush; a full or read-only disk is told
apart and said once, and once more when writing works again (write_faults.py,
docs/faults.md); any other failure is said once per cause.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from pathlib import Path

from gputop.core.clock_events import throttling
from gputop.core.history.claim_spans import OpenClaimSpan
from gputop.core.history.health_rows import HealthRows
from gputop.core.history.schema import RAW
from gputop.core.history.spans import OpenSpan
from gputop.core.history.store import HISTORY, HistoryError
from gputop.core.history.wal_bound import WalBound
from gputop.core.model import GpuProcess, GpuSample, Snapshot
from gputop.core.records import frozen
from gputop.core.redact import CommandForm, bounded_argv, bounded_for_others
from gputop.core.safe_text import clean, clean_argv
from gputop.core.sqlite_files import immediate, store_cause
from gputop.core.write_faults import FaultReporter, WriteFault, write_fault_of

MAX_CACHED_STRINGS = 10_000
DEFAULT_MAX_PENDING = 720
"""An hour of 5-second samples kept in memory while the store cannot be written."""


@frozen
class PendingSample:
    snapshot: Snapshot
    duration_s: float


class HistoryWriter:
    """Turns snapshots into rows; remembers the ids of strings and processes it wrote.

    ``path`` is the store's file (named in what is said, and its directory asked whether
    the disk is full or read-only when SQLite only says "disk I/O error"); ``say`` receives
    what a person must be told. Without a ``connection`` (the store could not be opened for
    a full or read-only disk), ``connect`` opens it at each flush until it works.
    ``command_form``: how a command line is written in a store others read (redact.py);
    ``None`` keeps it whole (a private store).
    """

    def __init__(
        self,
        connection: sqlite3.Connection | None,
        path: Path,
        say: Callable[[str], None],
        max_pending: int = DEFAULT_MAX_PENDING,
        job_of: Callable[[GpuProcess], str | None] | None = None,
        connect: Callable[[], sqlite3.Connection] | None = None,
        command_form: CommandForm | None = None,
    ) -> None:
        self._connection = connection
        self._command_form = command_form
        self._connect = connect
        self._path = path
        self._say = say
        self._job_of = job_of
        self.faults = FaultReporter(
            f"the history store {path}",
            "gputop keeps sampling, keeps the samples in memory (the oldest are dropped "
            f"beyond {max_pending}) and writes them when the store can be written again.",
            say,
        )
        self._other_failure: str | None = None
        self._pending: deque[PendingSample] = deque(maxlen=max_pending)
        self._dropped = 0
        """Samples dropped (the oldest, beyond ``max_pending``) since the last write."""
        self._strings: dict[str, int] = {}
        self._processes: dict[tuple[int, float | None], int] = {}
        self._open: dict[tuple[int, int], OpenSpan] = {}
        """The span each (process id, physical index) is in, from the last sample."""
        self._closed: list[OpenSpan] = []
        self._clock_steps: deque[tuple[float, float]] = deque(maxlen=max_pending)
        """Steps to write with the next batch: one per sample at most, so as many as those."""
        self.wal = WalBound(path, say)
        self._claims: dict[tuple[int, int], OpenClaimSpan] = {}
        """The claim span each (user id, physical index) is in (claim_spans.py)."""
        self._claims_closed: list[OpenClaimSpan] = []
        self._health = HealthRows(self._db, self._string_id)
        """Each card's Xids and health counters (health_rows.py)."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def connection(self) -> sqlite3.Connection | None:
        return self._connection

    def open_store(self) -> bool:
        """Open the store with ``connect`` where it is not open; False (said once) while a
        full or read-only disk keeps it from opening. Any other refusal is raised."""
        if self._connection is not None:
            return True
        if self._connect is None:
            return False
        try:
            self._connection = self._connect()
        except HistoryError as error:
            if error.fault is None:
                raise
            self.faults.failed(error.fault)
            return False
        return True

    def add(self, snapshot: Snapshot, duration_s: float) -> None:
        if len(self._pending) == self._pending.maxlen:  # the oldest goes: said once
            self._dropped += 1
            if self._dropped == 1:
                self._say(
                    f"Dropping the oldest samples: {self._pending.maxlen} samples are waiting "
                    f"in memory to be written to the history store {self._path}, as many as "
                    "are kept (how many were dropped is said when writing works again)."
                )
        self._pending.append(PendingSample(snapshot, duration_s))

    def add_clock_step(self, t: float, step_s: float) -> None:
        """A step of the wall clock, written with the next batch (a marker in the store)."""
        self._clock_steps.append((t, step_s))

    def flush(self) -> bool:
        """Write every pending sample in one transaction; False (kept pending) on failure."""
        if not self._pending:
            return True
        if not self.open_store():
            return False
        connection = self._connection
        assert connection is not None
        if not self.wal.room(connection):
            return False  # a reader holds the -wal back: kept pending, said once
        try:
            with immediate(connection):
                for pending in self._pending:
                    self._write(pending)
                self._save_spans()
                connection.executemany(
                    "INSERT INTO clock_steps (t, step_s) VALUES (?, ?)", self._clock_steps
                )
        except (sqlite3.Error, OSError) as error:
            # What was learnt in the failed transaction was rolled back with it: the samples
            # are written again from scratch, their processes in new spans.
            self._strings.clear()
            self._processes.clear()
            self._open.clear()
            self._closed.clear()
            self._claims.clear()
            self._claims_closed.clear()
            self._health.rolled_back()
            self._failed(error)
            return False
        self._pending.clear()
        self._clock_steps.clear()
        self._health.committed()
        self._succeeded()
        if self._dropped:
            self._say(
                f"{self._dropped} samples were dropped while the history store {self._path} "
                "could not be written; it is written again."
            )
            self._dropped = 0
        self._forget_gone()
        self.wal.after_write(connection)
        return True

    def fault_of(self, error: sqlite3.Error | OSError) -> WriteFault | None:
        """The full or read-only disk ``error`` shows, if any (write_faults.py)."""
        return write_fault_of(error, self._path.parent)

    def _failed(self, error: sqlite3.Error | OSError) -> None:
        """Said once: a full or read-only disk through ``faults``, anything else per cause."""
        fault = self.fault_of(error)
        if fault is not None:
            self._other_failure = None
            self.faults.failed(fault)
            return
        cause = clean(store_cause(HISTORY, error, "")) or type(error).__name__
        if cause != self._other_failure:
            self._other_failure = cause
            self._say(
                f"Cannot write the history store {self._path}: {cause}. {self.faults.consequence}"
            )

    def _succeeded(self) -> None:
        if self._other_failure is not None and self.faults.fault is None:
            self._say(f"The history store {self._path} can be written again.")
        self._other_failure = None
        self.faults.succeeded()

    def _db(self) -> sqlite3.Connection:
        """The open store, inside ``flush``."""
        assert self._connection is not None
        return self._connection

    def _forget_gone(self) -> None:
        """Keep the id caches to what is on the cards now: a recorder runs for months."""
        live = {process_id for process_id, _card in self._open}
        self._processes = {key: pid for key, pid in self._processes.items() if pid in live}
        if len(self._strings) > MAX_CACHED_STRINGS:
            self._strings.clear()

    def _write(self, pending: PendingSample) -> None:
        snapshot = pending.snapshot
        cursor = self._db().execute(
            "INSERT INTO samples (t, duration_s, resolution_s) VALUES (?, ?, ?)",
            (snapshot.timestamp, pending.duration_s, RAW),
        )
        sample_id = cursor.lastrowid
        gpu_rows = []
        seen: set[tuple[int, int]] = set()
        claimed: set[tuple[int, int]] = set()
        for gpu in snapshot.gpus:
            if gpu.lost or gpu.no_access:  # a lost card's last counters and Xids since
                self._health.add(gpu, snapshot.timestamp, ())
                continue
            gpu_rows.append(
                (
                    sample_id,
                    gpu.physical_index,
                    self._string_id(gpu.uuid),
                    gpu.utilization_gpu_percent,
                    gpu.memory_used_bytes,
                    gpu.memory_total_bytes,
                    gpu.power_w,
                    gpu.temperature_c,
                    gpu.activity.sm_active_percent,
                    gpu.activity.tensor_active_percent,
                    gpu.activity.dram_active_percent,
                    _throttled(gpu),
                )
            )
            on_card = self._extend_spans(gpu, snapshot.timestamp, pending.duration_s, seen)
            self._extend_claim(gpu, snapshot.timestamp, pending.duration_s, claimed)
            self._health.add(gpu, snapshot.timestamp, on_card)
        for key in [key for key in self._open if key not in seen]:
            self._closed.append(self._open.pop(key))
        for key in [key for key in self._claims if key not in claimed]:
            self._claims_closed.append(self._claims.pop(key))
        marks = ", ".join("?" * len(gpu_rows[0])) if gpu_rows else ""
        self._db().executemany(f"INSERT INTO gpu_samples VALUES ({marks})", gpu_rows)

    def _extend_spans(
        self, gpu: GpuSample, end_t: float, duration_s: float, seen: set[tuple[int, int]]
    ) -> tuple[int, ...]:
        """Extend the spans of ``gpu``'s processes; returns their rows' ids."""
        start_t = end_t - duration_s
        alone = _alone_activity(gpu)
        on_card: list[int] = []
        for process in gpu.processes:
            key = (self._process_id(process), gpu.physical_index)
            if key in seen:  # a MIG device's process listed twice: once is enough
                continue
            seen.add(key)
            on_card.append(key[0])
            span = self._open.get(key)
            if span is None or not span.continues(start_t):
                if span is not None:
                    self._closed.append(span)
                span = self._open[key] = OpenSpan(key[0], key[1], start_t, start_t)
            span.add(
                end_t,
                duration_s,
                process.used_memory_bytes,
                process.sm_util_percent,
                idle_sm=alone.get((process.pid, process.gpu_instance_id)),
            )
        return tuple(on_card)

    def _extend_claim(
        self, gpu: GpuSample, end_t: float, duration_s: float, claimed: set[tuple[int, int]]
    ) -> None:
        if gpu.claim is None or gpu.claim.doubt is not None:  # a believable claim's time only
            return
        user_id = self._string_id(clean(gpu.claim.user))
        assert user_id is not None
        key = (user_id, gpu.physical_index)
        claimed.add(key)
        start_t = end_t - duration_s
        span = self._claims.get(key)
        if span is None or not span.continues(start_t):
            if span is not None:
                self._claims_closed.append(span)
            span = OpenClaimSpan(user_id, self._string_id(gpu.uuid), key[1], start_t, start_t)
            self._claims[key] = span
        span.add(gpu, end_t, duration_s)

    def _save_spans(self) -> None:
        spans: list[OpenSpan | OpenClaimSpan] = [*self._claims_closed, *self._claims.values()]
        for span in [*spans, *self._closed, *self._open.values()]:
            if span.dirty:
                span.save(self._db())
        self._claims_closed.clear()
        self._closed.clear()

    def _string_id(self, text: str | None) -> int | None:
        if text is None:
            return None
        known = self._strings.get(text)
        if known is not None:
            return known
        self._db().execute("INSERT OR IGNORE INTO strings (text) VALUES (?)", (text,))
        row = self._db().execute("SELECT id FROM strings WHERE text = ?", (text,)).fetchone()
        self._strings[text] = int(row[0])
        return self._strings[text]

    def _process_id(self, process: GpuProcess) -> int:
        """The id of the process's row, written the first time the process is seen."""
        key = (process.pid, process.start_time)
        known = self._processes.get(key)
        if known is not None:
            return known
        row = (
            self._db()
            .execute("SELECT id FROM processes WHERE pid = ? AND start_time IS ?", key)
            .fetchone()
        )
        if row is not None:
            process_id = int(row[0])
        else:
            user_id = self._string_id(clean(process.user) if process.user is not None else None)
            # at most MAX_COMMAND_CHARS: each distinct command is kept for ever
            if self._command_form is not None:  # a shared store: others read it
                argv = bounded_for_others(process.command, self._command_form)
            else:
                argv = bounded_argv(process.command)
            command = clean_argv(argv) if argv else None
            job = self._job_of(process) if self._job_of is not None else None
            cursor = self._db().execute(
                "INSERT INTO processes (pid, start_time, user_id, command_id, job) "
                "VALUES (?, ?, ?, ?, ?)",
                (process.pid, process.start_time, user_id, self._string_id(command), job),
            )
            process_id = int(cursor.lastrowid or 0)
        self._processes[key] = process_id
        return process_id


def _alone_activity(gpu: GpuSample) -> dict[tuple[int, int | None], float]:
    """GPM's SM active for each process alone on its card or MIG GPU instance: what judges
    it idle there, as per-process SM % cannot tell a process stuck in a collective from one
    at work (docs/activity.md). Elsewhere per-process SM % judges."""
    found: dict[tuple[int, int | None], float] = {}
    pids: dict[int | None, set[int]] = {}
    for process in gpu.processes:
        pids.setdefault(process.gpu_instance_id, set()).add(process.pid)
    for instance, members in pids.items():
        if len(members) != 1:
            continue
        if instance is None:
            activity = gpu.activity
        else:
            owner = next((m for m in gpu.mig_devices if m.gpu_instance_id == instance), None)
            if owner is None:
                continue
            activity = owner.activity
        if activity.gpm and activity.sm_active_percent is not None:
            found[(next(iter(members)), instance)] = activity.sm_active_percent
    return found


def _throttled(gpu: GpuSample) -> float | None:
    """1 while a throttling clock event reason holds, 0 when none does; unknown: None."""
    if gpu.clock_event_mask is None:
        return None
    return 1.0 if throttling(gpu.clock_event_mask) else 0.0
