"""The reading of a reserved end file by gputop before files held more than the end: a
verbatim copy of ``_read_one``, ``_checked`` and ``_int_in`` from gputop/core/jobs/
pending_end.py at commit 7eef324 (the last of that format). A gputop of that version may
read the same state directory as a newer one: it must never misread a newer file
(tests/unit/test_pending_end.py). Frozen: never change it to follow the new format."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from gputop.core.jobs.unrecorded import RESERVED_BYTES, RecordedEnd
from gputop.core.jobs.usage import usage_from_json
from gputop.core.private_files import StoreError, open_private_file

MAX_NOTE_CHARS = 1000
_MAX_TIME = 253402300799.0


def read_as_before(run_dir: Path, job_id: int) -> RecordedEnd | None:
    """What a gputop of the old format reads in ``run_dir/<job_id>.end``."""
    dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return _read_one(dir_fd, run_dir, f"{job_id}.end", job_id)
    finally:
        os.close(dir_fd)


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
