"""A job's end, kept beside the store until the store can record it (docs/faults.md).

When the disk is full, the supervisor cannot write the job's end into the store. So at its
start it reserves a small file, ``run/ID.end``, with ``posix_fallocate``: its blocks are
the supervisor's before the disk fills, and writing into them needs no new space. When the
job ends, the end goes there first, then into the store; the file is removed once the
store holds it. A supervisor that must give up leaves the file, and every gputop that
reads the store shows the end from it, and records it as soon as it can write.

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
_MAX_TIME = 253402300799.0  # the end of year 9999, as for every time gputop reads


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
        note = self.note[:MAX_NOTE_CHARS] if self.note else None
        data: dict[str, object] = {
            "job": self.job_id,
            "ended_at": self.ended_at,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stopped": self.stopped,
            "note": note,
        }
        plain = json.dumps(data, allow_nan=False, ensure_ascii=True).encode()
        if self.usage is None:
            return plain
        data["usage"] = self.usage.to_json()
        full = json.dumps(data, allow_nan=False, ensure_ascii=True).encode()
        return full if len(full) <= RESERVED_BYTES else plain


class EndReservation:
    """The supervisor's reserved file for its job's end; ``None`` fields: not reserved."""

    def __init__(self, state_dir: Path, job_id: int) -> None:
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
            return  # no space even for this: the supervisor retries the store instead
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
        """Write ``end`` into the reserved blocks; False when there are none (or it failed)."""
        if self._fd is None:
            return False
        data = end.to_bytes()[:RESERVED_BYTES]
        try:
            os.pwrite(self._fd, data, 0)
            os.fsync(self._fd)
        except OSError:
            return False
        return True

    def release(self) -> None:
        """The store holds the end (or there was none to keep): the file goes."""
        self.close()
        self._remove()

    def close(self) -> None:
        """Keep the file (the supervisor gives up): the next gputop records what it holds."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def keep_end(state_dir: Path, end: RecordedEnd) -> bool:
    """Best effort, without a reservation (``jobs stop`` ended a job whose supervisor was
    gone, and the store cannot record it): False when even this small file cannot be
    written; the job then shows as lost, which is true."""
    try:
        dir_fd = open_private_dir(state_dir, create=False)
        try:
            run_fd = open_private_subdir(dir_fd, state_dir, RUN_DIR)
        finally:
            os.close(dir_fd)
        name = f"{end.job_id}{SUFFIX}"
        try:
            fd = open_private_file(run_fd, state_dir / RUN_DIR, name, os.O_WRONLY, "file")
        finally:
            os.close(run_fd)
    except StoreError:
        return False
    try:
        os.ftruncate(fd, 0)
        os.write(fd, end.to_bytes())
        os.fsync(fd)
    except OSError:
        forget_pending_end(state_dir, end.job_id)
        return False
    finally:
        os.close(fd)
    return True


def read_pending_ends(state_dir: Path) -> dict[int, RecordedEnd]:
    """Every end kept beside the store, by job id (a reserved file still empty: none)."""
    run_dir = state_dir / RUN_DIR
    found: dict[int, RecordedEnd] = {}
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
            end = _read_one(dir_fd, run_dir, name, int(stem))
            if end is not None:
                found[end.job_id] = end
    finally:
        os.close(dir_fd)
    return found


def forget_pending_end(state_dir: Path, job_id: int) -> None:
    """The store has recorded job ``job_id``'s end: its kept copy goes."""
    with contextlib.suppress(OSError):
        os.unlink(state_dir / RUN_DIR / f"{job_id}{SUFFIX}")


def _read_one(dir_fd: int, run_dir: Path, name: str, job_id: int) -> RecordedEnd | None:
    try:
        fd = open_private_file(dir_fd, run_dir, name, os.O_RDONLY, "file", create=False)
    except StoreError:
        return None
    try:
        data = os.read(fd, RESERVED_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = data.rstrip(b"\0 \n")
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return _checked(record, job_id)


def _checked(record: object, job_id: int) -> RecordedEnd | None:
    """The record if every value is what a supervisor writes; else ``None`` (ignored)."""
    if not isinstance(record, dict) or record.get("job") != job_id:
        return None
    ended_at = record.get("ended_at")
    exit_code = record.get("exit_code")
    signal = record.get("signal")
    stopped = record.get("stopped")
    note = record.get("note")
    if not isinstance(ended_at, (int, float)) or isinstance(ended_at, bool):
        return None
    if not math.isfinite(ended_at) or not 0 < ended_at <= _MAX_TIME:
        return None
    if exit_code is not None and not _int_in(exit_code, 0, 255):
        return None
    if signal is not None and not _int_in(signal, 1, 128):
        return None
    if not isinstance(stopped, bool) or (note is not None and not isinstance(note, str)):
        return None
    return RecordedEnd(
        job_id=job_id,
        ended_at=float(ended_at),
        exit_code=exit_code,
        signal=signal,
        stopped=stopped,
        note=note[:MAX_NOTE_CHARS] if note else None,
        usage=usage_from_json(record.get("usage")),
    )


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
