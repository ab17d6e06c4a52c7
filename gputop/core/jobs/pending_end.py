"""What a supervisor could not record in the store, kept beside it (docs/faults.md).

When the disk is full (or read-only), the supervisor cannot write its job's transitions into
the store. So at its start it reserves a small file, ``run/ID.end``, with
``posix_fallocate``: its blocks are the supervisor's before the disk fills, and writing into
them needs no new space. Every transition the store refuses goes there instead, in one JSON
object rewritten in place (``Kept``): the supervisor's own pid, the job's start, a stop
request, a note, and the end with what the job used. The file is the one record of them: the
supervisor keeps no other copy and exits once its job's end is in the store or in the file.

Every gputop that reads the store applies the file (``apply_kept``), and whoever can write
the store records what it holds once its supervisor is done with it (the end is there, or
the supervisor is gone) and removes it; a living supervisor records its file itself as soon
as the store takes writes again, and then clears it (store_rows.py).

The format is the one of gputop's first end files, with keys added: ``ended_at`` is there
only once the job ended, so a gputop that knows only ends ignores a file that holds none,
and reads the end (ignoring the rest) of one that does. Each record is padded with spaces to
the reserved size, so a shorter record never leaves the tail of a longer one behind it; a
reader that meets a record half written (or anything else it cannot read) takes the file as
holding nothing for this read, never as damage to act on.

The file is found in the state directory, so it is read like everything there: a regular
file of ours, reached without following a link, and every number range-checked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.usage import JobUsage, usage_from_json
from gputop.core.numbers import is_ascii_digits
from gputop.core.private_files import (
    StoreError,
    open_private_dir,
    open_private_file,
    open_private_subdir,
)

RUN_DIR = "run"
SUFFIX = ".end"
RESERVED_BYTES = 4096
MAX_NOTE_CHARS = 1000
SHORT_NOTE_CHARS = 100
"""A note cut to this where the record would not fit otherwise (non-ASCII is escaped)."""
MAX_PID = 2**22
"""Linux's highest pid (``PID_MAX_LIMIT``): a pid or a session past it is not one."""
_MAX_TIME = 253402300799.0  # the end of year 9999, as for every time gputop reads
MAX_TICKS = 2**63 - 1
"""The most clock ticks since boot a start can be (the kernel's is an unsigned 64-bit count;
SQLite's integers end here)."""
_READ_TRIES = 3
"""A record that does not parse is read again this often: it may be half rewritten."""


@dataclass(frozen=True)
class RecordedEnd:
    """How a job ended, as its supervisor saw it."""

    job_id: int
    ended_at: float
    exit_code: int | None = None
    signal: int | None = None
    stopped: bool = False
    note: str | None = None
    usage: JobUsage | None = None
    """What the job used (usage_meter.py): kept with its end, as the end itself."""

    def to_bytes(self) -> bytes:
        """The record, at most RESERVED_BYTES: a usage that does not fit is left out
        (the end matters more), never cut into JSON nobody can read."""
        return Kept(self.job_id, end=self).to_bytes()


@dataclass(frozen=True)
class ProcessSeen:
    """A process as the store records it: its pid, start time and session, and its start
    in clock ticks since boot (``None``: unread, or a file of a gputop before it)."""

    pid: int
    start_time: float | None
    session: int | None
    start_ticks: int | None = None


@dataclass(frozen=True)
class Kept:
    """The transitions of one job its supervisor could not record in the store yet, as
    its file holds them: each the newest of its kind (they are made in this order)."""

    job_id: int
    supervisor: ProcessSeen | None = None
    """The supervisor's own pid (``JobStore.mark_supervisor``)."""
    started: ProcessSeen | None = None
    """The job's process (``mark_started``), spawned at ``started_at``."""
    started_at: float | None = None
    note: str | None = None
    """A note set while the job ran (its log was cut: ``set_note``)."""
    stop_requested: bool = False
    end: RecordedEnd | None = None

    @property
    def empty(self) -> bool:
        return self == Kept(self.job_id)

    def to_bytes(self) -> bytes:
        """The record, at most RESERVED_BYTES: what does not fit goes, the usage first,
        then the notes' length; never cut into JSON nobody can read."""
        for with_usage, note_chars in (
            (True, MAX_NOTE_CHARS),
            (False, MAX_NOTE_CHARS),
            (False, SHORT_NOTE_CHARS),
            (False, 0),
        ):
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


def _process_fields(seen: ProcessSeen) -> dict[str, object]:
    fields: dict[str, object] = {
        "pid": seen.pid,
        "start_time": seen.start_time,
        "session": seen.session,
    }
    if seen.start_ticks is not None:  # a key added: a gputop before it ignores it
        fields["start_ticks"] = seen.start_ticks
    return fields


class EndReservation:
    """The supervisor's reserved file for what the store refuses; not ``reserved``: none
    (not even 4 KiB was free)."""

    def __init__(self, state_dir: Path, job_id: int) -> None:
        self.job_id = job_id
        self.path = state_dir / RUN_DIR / f"{job_id}{SUFFIX}"
        self._fd: int | None = None
        try:
            dir_fd = open_private_dir(state_dir, create=False)
            try:
                run_fd = open_private_subdir(dir_fd, state_dir, RUN_DIR)
            finally:
                os.close(dir_fd)
            try:
                fd = open_private_file(run_fd, self.path.parent, self.path.name, os.O_RDWR, "file")
            finally:
                os.close(run_fd)
        except StoreError:
            return  # no space even for this: the supervisor tries again later
        try:
            os.ftruncate(fd, 0)
            os.posix_fallocate(fd, 0, RESERVED_BYTES)
        except OSError:
            os.close(fd)
            self._remove()
            return
        self._fd = fd

    @property
    def reserved(self) -> bool:
        return self._fd is not None

    def keep(self, end: RecordedEnd) -> bool:
        """Write ``end`` alone into the reserved blocks (see ``keep_all``)."""
        return self.keep_all(Kept(end.job_id, end=end))

    def keep_all(self, kept: Kept) -> bool:
        """Write ``kept`` into the reserved blocks, in place of what they held: padded to
        their size, so no part of a longer record stays behind it; then to the disk.
        False when there are none, or writing failed."""
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
        self._remove()

    def close(self) -> None:
        """Keep the file: the next gputop that can write the store records what it holds."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def keep_end(state_dir: Path, end: RecordedEnd) -> bool:
    """Best effort, without a reservation (``jobs stop`` ended a job whose supervisor was
    gone, and the store cannot record it): the end is added to what the job's file holds.
    False when even this small file cannot be written; the job then shows as lost, which
    is true."""
    try:
        dir_fd = open_private_dir(state_dir, create=False)
        try:
            run_fd = open_private_subdir(dir_fd, state_dir, RUN_DIR)
        finally:
            os.close(dir_fd)
        name = f"{end.job_id}{SUFFIX}"
        try:
            before = _read_one(run_fd, state_dir / RUN_DIR, name, end.job_id)
            fd = open_private_file(run_fd, state_dir / RUN_DIR, name, os.O_WRONLY, "file")
        finally:
            os.close(run_fd)
    except StoreError:
        return False
    kept = dataclasses.replace(before or Kept(end.job_id), end=end)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, kept.to_bytes().ljust(RESERVED_BYTES, b" "))
        os.fsync(fd)
    except OSError:
        forget_pending_end(state_dir, end.job_id)
        return False
    finally:
        os.close(fd)
    return True


def read_kept(state_dir: Path) -> dict[int, Kept]:
    """What every job's file holds, by job id (a file that holds nothing, or nothing that
    reads as a supervisor writes it: none)."""
    run_dir = state_dir / RUN_DIR
    found: dict[int, Kept] = {}
    try:
        names = [name for name in os.listdir(run_dir) if name.endswith(SUFFIX)]
    except OSError:
        return found
    if not names:
        return found
    try:
        dir_fd = open_private_dir(run_dir, create=False)
    except StoreError:
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
    """Every end kept beside the store, by job id."""
    return {job_id: kept.end for job_id, kept in read_kept(state_dir).items() if kept.end}


def forget_pending_end(state_dir: Path, job_id: int) -> None:
    """The store has recorded what job ``job_id``'s file held: the file goes."""
    with contextlib.suppress(OSError):
        os.unlink(state_dir / RUN_DIR / f"{job_id}{SUFFIX}")


def _read_one(dir_fd: int, run_dir: Path, name: str, job_id: int) -> Kept | None:
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


def _checked(record: object, job_id: int) -> Kept | None:
    """The record if every value is what a supervisor writes; else ``None`` (ignored)."""
    if not isinstance(record, dict) or not _int_in(record.get("job"), job_id, job_id):
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
    kept = Kept(job_id, supervisor, started, started_at, note, stop_requested, end)
    return None if kept.empty else kept


class _NotOurs(Exception):
    """A value no supervisor writes."""


def _end(record: dict[str, Any], job_id: int) -> RecordedEnd:
    exit_code = record.get("exit_code")
    signal = record.get("signal")
    stopped = record.get("stopped")
    if exit_code is not None and not _int_in(exit_code, 0, 255):
        raise _NotOurs
    if signal is not None and not _int_in(signal, 1, 128):
        raise _NotOurs
    if not isinstance(stopped, bool):
        raise _NotOurs
    return RecordedEnd(
        job_id=job_id,
        ended_at=_time(record.get("ended_at")),
        exit_code=exit_code,
        signal=signal,
        stopped=stopped,
        note=_text(record.get("note")),
        usage=usage_from_json(record.get("usage")),
    )


def _process(value: object) -> ProcessSeen | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _NotOurs
    pid, start_time, session = value.get("pid"), value.get("start_time"), value.get("session")
    if not isinstance(pid, int) or not _int_in(pid, 1, MAX_PID):
        raise _NotOurs
    if session is not None and not _int_in(session, 0, MAX_PID):
        raise _NotOurs
    # getsid() gives 0 where the session's leader is outside this pid namespace (a
    # container): no session this reader could name, as None says.
    start = None if start_time is None else _time(start_time)
    ticks = value.get("start_ticks")
    if ticks is not None and not _int_in(ticks, 0, MAX_TICKS):
        raise _NotOurs
    return ProcessSeen(pid, start, session or None, ticks)


def _time(value: object) -> float:
    """A time a supervisor writes: seconds since 1970, finite, before year 10000."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _NotOurs
    if not math.isfinite(value) or not 0 < value <= _MAX_TIME:
        raise _NotOurs
    return float(value)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _NotOurs
    return value[:MAX_NOTE_CHARS] or None


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def ended_as_kept(job: Job, end: RecordedEnd) -> Job:
    """``job`` as its supervisor saw it end (kept beside the store, not yet recorded)."""
    return dataclasses.replace(
        job,
        state=JobState.ENDED,
        exit_code=end.exit_code,
        signal=end.signal,
        ended_at=end.ended_at,
        note=end.note or job.note,
        stop_requested=job.stop_requested or end.stopped,
        usage=end.usage or job.usage,
    )


def apply_kept(job: Job, kept: Kept) -> Job:
    """``job`` (its row) as the store will hold it once what ``kept`` holds is recorded:
    each transition as the store's own write makes it (store.py), in the order made."""
    active = job.state in (JobState.WAITING, JobState.RUNNING)
    changes: dict[str, Any] = {}
    if kept.supervisor is not None:
        changes["supervisor_pid"] = kept.supervisor.pid
        changes["supervisor_start_time"] = kept.supervisor.start_time
        changes["supervisor_session_id"] = kept.supervisor.session
        changes["supervisor_start_ticks"] = kept.supervisor.start_ticks
    if kept.started is not None and active:
        changes.update(
            state=JobState.RUNNING,
            pid=kept.started.pid,
            pid_start_time=kept.started.start_time,
            pid_start_ticks=kept.started.start_ticks,
            session_id=kept.started.session,
            started_at=kept.started_at,
            note=None,
        )
    if kept.note is not None and active:
        changes["note"] = kept.note
    if kept.stop_requested and job.state is not JobState.ENDED:
        changes["stop_requested"] = True
    seen = dataclasses.replace(job, **changes) if changes else job
    if kept.end is not None and job.state is not JobState.ENDED:
        seen = ended_as_kept(seen, kept.end)
    return seen
