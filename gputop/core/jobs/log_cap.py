"""A job's log has a size cap, and stops growing when the disk is nearly full.

The job writes its log itself (the supervisor gives it the file as stdout, appending), so
it keeps running and keeps its output even if its supervisor is killed. The supervisor
watches the log's size twice a second. Past the cap it keeps the log's beginning (half the
cap), a mark, and a rolling end (a quarter of the cap): the newest lines are moved to just
after the mark and the file is cut there. Where free space falls under a floor, it does the
same with a rolling end of 64 KiB, so the log stops taking space while the job runs on.

The mark is one line, rewritten in place at each cut with the bytes left out so far:
``[gputop] ---- N bytes of output left out here: ... ----``. A job appends with
``O_APPEND``, so a line it writes in the moment between the last copy and the cut (a few
microseconds, after a check that nothing new came) can be lost with the cut part.
(docs/faults.md)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gputop.core.jobs.logs import LOG_PREFIX
from gputop.core.jobs.model import LOG_CUT_NOTE
from gputop.core.private_files import StoreError, open_private_dir, open_private_file

DEFAULT_LOG_MAX_BYTES = 1024**3
MIN_LOG_MAX_BYTES = 64 * 1024
MAX_LOG_MAX_BYTES = 1024**5
LOG_MAX_ENV = "GPUTOP_LOG_MAX"
FLOOR_ENV = "GPUTOP_LOG_FLOOR"
DEFAULT_FLOOR_BYTES = 256 * 1024**2
FLOOR_TAIL_BYTES = 64 * 1024
CHECK_S = 0.5
_COPY_CHUNK = 1024**2
_MARK_DIGITS = 20


def parse_size(text: str, what: str) -> int:
    """``1G``, ``512M``, ``64k`` or a byte count; ValueError naming ``what`` otherwise."""
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = value[-1:] if value[-1:] in units else ""
    digits = value[: len(value) - len(suffix)].strip()
    if not digits.isascii() or not digits.isdigit() or len(digits) > 18:
        raise ValueError(f"{what} {text!r} is not a size: give bytes, or a number with k, M, G")
    return int(digits) * units[suffix]


def size_text(value_bytes: int) -> str:
    """``1 GiB``, ``256 MiB``, ``64 KiB`` (whole units where they are), else bytes."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value_bytes >= size:
            return f"{value_bytes / size:.3g} {unit}"
    return f"{value_bytes} bytes"


def limits_from(environ: Mapping[str, str], log_max: int | None) -> tuple[int, int]:
    """(cap, floor) in bytes: ``log_max`` (``--log-max``), else ``GPUTOP_LOG_MAX``, else
    1 GiB; the floor from ``GPUTOP_LOG_FLOOR``, else 256 MiB. A bad value: the default."""
    cap = log_max if log_max is not None else _env_size(environ, LOG_MAX_ENV)
    if cap is None or not MIN_LOG_MAX_BYTES <= cap <= MAX_LOG_MAX_BYTES:
        cap = DEFAULT_LOG_MAX_BYTES
    floor = _env_size(environ, FLOOR_ENV)
    if floor is None or floor > MAX_LOG_MAX_BYTES:
        floor = DEFAULT_FLOOR_BYTES
    return cap, floor


def _env_size(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name)
    if not text:
        return None
    try:
        return parse_size(text, name)
    except ValueError:
        return None


def mark_line(cut_bytes: int, max_bytes: int) -> bytes:
    """The mark where the log was cut, always the same length."""
    return (
        f"\n{LOG_PREFIX}---- {cut_bytes:>{_MARK_DIGITS}} bytes of output left out here: the "
        f"log is kept under {size_text(max_bytes)} (its beginning and its newest lines; "
        "docs/faults.md) ----\n"
    ).encode()


class LogCap:
    """Keeps one job's log under ``max_bytes``; ``check()`` at each supervisor poll."""

    def __init__(self, log_path: str, max_bytes: int, floor_bytes: int) -> None:
        self.log_path = log_path
        self.max_bytes = max_bytes
        self.floor_bytes = floor_bytes
        self.cut_bytes = 0
        self._mark_at: int | None = None
        self._why: str | None = None
        self._fd = _open_for_cutting(log_path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def check(self) -> str | None:
        """Cut the log if it is past the cap or the disk is nearly full; what happened, for
        the log and the job's note, the first time (and when the reason changes)."""
        if self._fd is None:
            return None
        try:
            size = os.fstat(self._fd).st_size
            if _free_bytes(self._fd) < self.floor_bytes:
                head = self._mark_at
                if head is None:
                    head = min(self.max_bytes // 2, size // 2)
                if size > head + len(mark_line(0, self.max_bytes)) + 2 * FLOOR_TAIL_BYTES:
                    why = f"free space fell under {size_text(self.floor_bytes)}"
                    return self._cut(head, FLOOR_TAIL_BYTES, why)
            if size > self.max_bytes:
                why = f"it reached its cap of {size_text(self.max_bytes)}"
                return self._cut(self.max_bytes // 2, self.max_bytes // 4, why)
        except OSError:
            return None  # the disk is full: the next check tries again
        return None

    def _cut(self, head: int, tail: int, why: str) -> str | None:
        fd = self._fd
        assert fd is not None
        first = self._mark_at is None
        mark = mark_line(0, self.max_bytes)
        keep_from = (self._mark_at + len(mark)) if self._mark_at is not None else head + len(mark)
        size = os.fstat(fd).st_size
        start = max(size - tail, keep_from)
        if start <= keep_from:
            return None
        start = _next_line(fd, start, size)
        write_at = keep_from
        read_at = start
        while True:  # move the newest lines to just after the mark, then cut there
            size = os.fstat(fd).st_size
            if read_at >= size:
                break
            chunk = os.pread(fd, min(_COPY_CHUNK, size - read_at), read_at)
            if not chunk:
                break
            os.pwrite(fd, chunk, write_at)
            write_at += len(chunk)
            read_at += len(chunk)
        os.ftruncate(fd, write_at)
        self.cut_bytes += read_at - write_at + (len(mark) if first else 0)
        mark_at = self._mark_at if self._mark_at is not None else head
        os.pwrite(fd, mark_line(self.cut_bytes, self.max_bytes), mark_at)
        self._mark_at = mark_at
        if first or why != self._why:
            self._why = why
            return f"{LOG_CUT_NOTE}: {why}; kept its beginning and newest lines (docs/faults.md)"
        return None


def _open_for_cutting(log_path: str) -> int | None:
    path = Path(log_path)
    try:
        dir_fd = open_private_dir(path.parent, create=False)
    except StoreError:
        return None
    try:
        return open_private_file(dir_fd, path.parent, path.name, os.O_RDWR, "job log", create=False)
    except StoreError:
        return None
    finally:
        os.close(dir_fd)


def _free_bytes(fd: int) -> int:
    info = os.fstatvfs(fd)
    return info.f_bavail * info.f_frsize


def _next_line(fd: int, start: int, size: int) -> int:
    """The start of the first whole line at or after ``start`` (``start`` if none near)."""
    window = os.pread(fd, min(64 * 1024, size - start), start)
    newline = window.find(b"\n")
    return start if newline < 0 else start + newline + 1
