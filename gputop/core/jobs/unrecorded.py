"""What a supervisor could not record in the store, kept in a file it reserved (docs/faults.md).

``run/ID.end`` is reserved at the start, so writing it needs no new space on a full disk:
each transition the store refuses goes there, in one JSON object rewritten in place. Readers
apply it, writers record it (current.py); a record no supervisor writes holds nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from gputop.core.jobs.model import LARGEST_SIGNAL, Job
from gputop.core.jobs.store_rows import (
    MAX_TICKS,
    ProcessSeen,
    Transition,
    ended,
    note_set,
    started,
    stop_asked,
    supervisor_seen,
)
from gputop.core.jobs.usage import JobUsage, usage_from_json
from gputop.core.numbers import LATEST_TIME_S, PID_MAX_LIMIT, is_ascii_digits, whole_within, within
from gputop.core.private_files import (
    StoreError,
    open_private_dir,
    open_private_file,
    open_private_subdir,
)
from gputop.core.records import frozen

RUN_DIR = "run"
SUFFIX = ".end"
RESERVED_BYTES = 4096
MAX_NOTE_CHARS = 1000
SHORT_NOTE_CHARS = 100
"""A note cut to this where the record would not fit otherwise (non-ASCII is escaped)."""
_READ_TRIES = 3
"""A record that does not parse is read again this often: it may be half rewritten."""


@frozen(slots=False)
class RecordedEnd:
    """How a job ended, as its supervisor saw it."""

    job_id: int
    ended_at: float
    exit_code: int | None = None
    signal: int | None = None
    stopped: bool = False
    note: str | None = None
    usage: JobUsage | None = None

    def transition(self, stopped: bool | None = None) -> Transition:
        """The end as the store records it; ``stopped`` as the supervisor knows it (``None``:
        set where kept so, else as recorded: a stop on its way did not end it)."""
        return ended(
            exit_code=self.exit_code,
            signal=self.signal,
            note=self.note,
            stopped=(self.stopped or None) if stopped is None else stopped,
            ended_at=self.ended_at,
            usage=self.usage,
            kept=self,
        )


@frozen(slots=False)
class Unrecorded:
    """One job's transitions the store did not take yet, each the newest of its kind,
    recorded in the order of ``transitions``."""

    job_id: int
    supervisor: ProcessSeen | None = None
    started: ProcessSeen | None = None
    started_at: float | None = None
    note: str | None = None
    stop_requested: bool = False
    end: RecordedEnd | None = None

    @property
    def empty(self) -> bool:
        return self == Unrecorded(self.job_id)

    def transitions(self) -> list[Transition]:
        held: list[Transition | None] = [
            None if self.supervisor is None else supervisor_seen(self.supervisor),
            None if self.started is None else started(self.started, self.started_at),
            None if self.note is None else note_set(self.note),
            stop_asked() if self.stop_requested else None,
            None if self.end is None else self.end.transition(),
        ]
        return [transition for transition in held if transition is not None]

    def applied(self, job: Job) -> Job:
        for transition in self.transitions():
            job = transition.applied(job)
        return job

    def holding(self, transition: Transition) -> Unrecorded:
        return dataclasses.replace(self, **transition.kept)

    def to_bytes(self) -> bytes:
        """The record, at most RESERVED_BYTES: what does not fit goes, the usage first (the
        end matters more), then the notes' length; never cut into JSON nobody can read."""
        for with_usage, note_chars in _SHRINKING:
            data = json.dumps(
                self._fields(with_usage, note_chars), allow_nan=False, ensure_ascii=True
            ).encode()
            if len(data) <= RESERVED_BYTES:
                return data
        raise AssertionError("a record without notes always fits")  # pragma: no cover

    def _fields(self, with_usage: bool, note_chars: int) -> dict[str, object]:
        data: dict[str, object] = {"job": self.job_id}
        if self.supervisor is not None:
            data["supervisor"] = _process_fields(self.supervisor)
        if self.started is not None:
            data["started"] = {**_process_fields(self.started), "at": self.started_at}
        if self.note is not None:
            data["set_note"] = self.note[:note_chars]
        if self.stop_requested:
            data["stop_requested"] = True
        end = self.end
        if end is not None:  # the keys (and values) of gputop's first end files
            data["ended_at"] = end.ended_at
            data["exit_code"] = end.exit_code
            data["signal"] = end.signal
            data["stopped"] = end.stopped
            data["note"] = (end.note or "")[:note_chars] or None
            if with_usage and end.usage is not None:
                data["usage"] = end.usage.to_json()
        return data


_SHRINKING = (
    (True, MAX_NOTE_CHARS), (False, MAX_NOTE_CHARS), (False, SHORT_NOTE_CHARS), (False, 0),
)  # fmt: skip


def _process_fields(seen: ProcessSeen) -> dict[str, object]:
    fields: dict[str, object] = {"pid": seen.pid, "start_time": seen.start_time}
    fields["session"] = seen.session
    if seen.start_ticks is not None:  # a key added: a gputop before it ignores it
        fields["start_ticks"] = seen.start_ticks
    return fields


def _open_end_file(state_dir: Path, job_id: int) -> tuple[int, Unrecorded | None]:
    """Job ``job_id``'s file, created where missing, and what it held; StoreError."""
    dir_fd = open_private_dir(state_dir, create=False)
    try:
        run_fd = open_private_subdir(dir_fd, state_dir, RUN_DIR)
    finally:
        os.close(dir_fd)
    name = f"{job_id}{SUFFIX}"
    try:
        before = _read_one(run_fd, state_dir / RUN_DIR, name, job_id)
        return open_private_file(run_fd, state_dir / RUN_DIR, name, os.O_RDWR, "file"), before
    finally:
        os.close(run_fd)


class EndReservation:
    """The supervisor's reserved file (not ``reserved``: not even 4 KiB was free)."""

    def __init__(self, state_dir: Path, job_id: int) -> None:
        self.job_id = job_id
        self._state_dir = state_dir
        self.path = state_dir / RUN_DIR / f"{job_id}{SUFFIX}"
        self._fd: int | None = None
        self.before: Unrecorded | None = None
        """What the file held before it was reserved again."""
        try:
            fd, self.before = _open_end_file(state_dir, job_id)
        except StoreError:
            return  # no space even for this: the supervisor tries again later
        try:
            os.ftruncate(fd, 0)
            os.posix_fallocate(fd, 0, RESERVED_BYTES)
        except OSError:
            os.close(fd)
            forget_unrecorded(self._state_dir, self.job_id)
            return
        self._fd = fd

    @property
    def reserved(self) -> bool:
        return self._fd is not None

    def keep_all(self, kept: Unrecorded) -> bool:
        """Write ``kept`` over the blocks (padded: no tail of a longer record stays), then to
        the disk; False: none, or it failed."""
        return self._write(kept.to_bytes().ljust(RESERVED_BYTES, b" "))

    def clear(self) -> bool:
        """The store took everything: the blocks hold nothing (they stay reserved)."""
        return self._write(b" " * RESERVED_BYTES)

    def _write(self, data: bytes) -> bool:
        if self._fd is None:
            return False
        try:
            os.pwrite(self._fd, data[:RESERVED_BYTES], 0)
            os.fsync(self._fd)
        except OSError:
            return False
        return True

    def release(self) -> None:
        """The store holds everything: the file goes."""
        self.close()
        forget_unrecorded(self._state_dir, self.job_id)

    def close(self) -> None:
        """Keep the file: the next gputop that can write the store records what it holds."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def keep_end(state_dir: Path, end: RecordedEnd) -> bool:
    """Best effort, without a reservation (``jobs stop`` ended a job whose supervisor was
    gone, and the store refuses it): the end added to the job's file. False when even this
    cannot be written; the job then shows as lost, which is true."""
    file = EndReservation(state_dir, end.job_id)
    kept = file.keep_all(dataclasses.replace(file.before or Unrecorded(end.job_id), end=end))
    if file.reserved and not kept:
        file.release()  # half written, perhaps: no record at all
    else:
        file.close()
    return kept


def read_unrecorded(state_dir: Path) -> dict[int, Unrecorded]:
    """What every job's file holds, by job id (none for one that holds nothing of ours)."""
    run_dir = state_dir / RUN_DIR
    found: dict[int, Unrecorded] = {}
    try:
        names = [name for name in os.listdir(run_dir) if name.endswith(SUFFIX)]
        dir_fd = open_private_dir(run_dir, create=False) if names else None
    except (OSError, StoreError):
        return found
    if dir_fd is None:
        return found
    try:
        for name in names:
            stem = name[: -len(SUFFIX)]
            if not is_ascii_digits(stem) or len(stem) > 18:
                continue
            kept = _read_one(dir_fd, run_dir, name, int(stem))
            if kept is not None:
                found[kept.job_id] = kept
    finally:
        os.close(dir_fd)
    return found


def read_pending_ends(state_dir: Path) -> dict[int, RecordedEnd]:
    return {job_id: kept.end for job_id, kept in read_unrecorded(state_dir).items() if kept.end}


def forget_unrecorded(state_dir: Path, job_id: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(state_dir / RUN_DIR / f"{job_id}{SUFFIX}")


def _read_one(dir_fd: int, run_dir: Path, name: str, job_id: int) -> Unrecorded | None:
    try:
        fd = open_private_file(dir_fd, run_dir, name, os.O_RDONLY, "file", create=False)
    except StoreError:
        return None
    try:
        if os.fstat(fd).st_size > RESERVED_BYTES:
            return None  # no supervisor writes more
        for _ in range(_READ_TRIES):
            text = os.pread(fd, RESERVED_BYTES, 0).rstrip(b"\0 \n")
            if not text:
                return None
            try:
                record = json.loads(text)
            except ValueError:
                continue  # half rewritten, perhaps: read it again
            return _checked(record, job_id)
    except (OSError, RecursionError, OverflowError):  # 10**400 where a time belongs
        return None
    finally:
        os.close(fd)
    return None


def _checked(record: object, job_id: int) -> Unrecorded | None:
    """The record if every value is what a supervisor writes; else ``None`` (ignored)."""
    if not isinstance(record, dict) or not whole_within(record.get("job"), job_id, job_id):
        return None
    try:
        supervisor = _process(record.get("supervisor"))
        started = _process(record.get("started"))
        started_at = _time(record["started"].get("at")) if started is not None else None
        note = _text(record.get("set_note"))
        stop_requested = record.get("stop_requested", False)
        end = _end(record, job_id) if "ended_at" in record else None
    except _NotOurs:
        return None
    if not isinstance(stop_requested, bool):
        return None
    kept = Unrecorded(job_id, supervisor, started, started_at, note, stop_requested, end)
    return None if kept.empty else kept


class _NotOurs(Exception):
    """A value no supervisor writes."""


def _end(record: dict[str, Any], job_id: int) -> RecordedEnd:
    exit_code = record.get("exit_code")
    signal = record.get("signal")
    stopped = record.get("stopped")
    if exit_code is not None and not whole_within(exit_code, 0, 255):
        raise _NotOurs
    if signal is not None and not whole_within(signal, 1, LARGEST_SIGNAL):
        raise _NotOurs
    if not isinstance(stopped, bool):
        raise _NotOurs
    ended_at, note = _time(record.get("ended_at")), _text(record.get("note"))
    usage = usage_from_json(record.get("usage"))
    return RecordedEnd(job_id, ended_at, exit_code, signal, stopped, note, usage)


def _process(value: object) -> ProcessSeen | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _NotOurs
    pid, start_time, session = value.get("pid"), value.get("start_time"), value.get("session")
    if not whole_within(pid, 1, PID_MAX_LIMIT):
        raise _NotOurs
    if session is not None and not whole_within(session, 0, PID_MAX_LIMIT):
        raise _NotOurs
    # getsid() gives 0 where the session's leader is outside this pid namespace (a
    # container): no session this reader could name, as None says.
    start = None if start_time is None else _time(start_time)
    ticks = value.get("start_ticks")
    if ticks is not None and not whole_within(ticks, 0, MAX_TICKS):
        raise _NotOurs
    return ProcessSeen(pid, start, session or None, ticks)


def _time(value: object) -> float:
    """A time a supervisor writes: seconds since 1970, finite, before year 10000."""
    if not isinstance(value, (int, float)) or not within(value, 0, LATEST_TIME_S) or not value:
        raise _NotOurs
    return float(value)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _NotOurs
    return value[:MAX_NOTE_CHARS] or None
