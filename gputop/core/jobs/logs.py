"""Job logs: private files the job appends to, capped by its supervisor, followed by readers.

A log holds the job's output and gputop's own ``[gputop]`` lines. Readers decode it
incrementally, cap each read and make it safe for a terminal (docs/security.md); the job
writes it itself, so it keeps its output if its supervisor is killed, and the supervisor
keeps it under a cap and a floor of free space (``LogCap``, docs/faults.md).
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Mapping
from typing import BinaryIO

from gputop.core import settings
from gputop.core.jobs.model import LOG_CUT_NOTE
from gputop.core.private_files import StoreError, open_checked_file, open_regular
from gputop.core.records import frozen
from gputop.core.safe_text import clean, clean_keeping_colours, split_unfinished_sgr

LOG_PREFIX = "[gputop] "


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """A job's log opened for reading: never through a link, only a regular file (O_NONBLOCK:
    a FIFO planted in its place cannot block the reader; docs/security.md)."""
    fd = open_regular(path, follow_links=False)[0]
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def gputop_line(text: str) -> bytes:
    """One line gputop writes into a job's log, stamped with the local time, cleaned whole: it
    quotes names, commands and errors, and logs are shown on terminals that keep colours."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"{LOG_PREFIX}{stamp} {clean(text)}\n".encode()


def last_line(path: str | os.PathLike[str], tail_bytes: int = 16384) -> str | None:
    """The job's last non-empty output line (after a progress bar's last ``\\r``); gputop's
    own lines only when it printed none."""
    try:
        with open_log(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - tail_bytes))
            tail = handle.read()
    except OSError:
        return None
    lines = [_shown(line) for line in tail.decode(errors="replace").split("\n")]
    lines = [line for line in lines if line.strip()]
    own = [line for line in lines if not line.startswith(LOG_PREFIX)]
    chosen = own or lines
    return chosen[-1].strip() if chosen else None


def _shown(line: str) -> str:
    parts = [part for part in line.split("\r") if part.strip()]
    return parts[-1] if parts else ""


# --- following a log ------------------------------------------------------------------


FIRST_READ_BYTES = 256 * 1024
"""How much of an existing log to show at first: its end, like ``tail``."""
MAX_READ_BYTES = 1024 * 1024
"""The most one read takes in; what is more than this behind is skipped."""
MAX_LINE_CHARS = 64 * 1024
"""A line longer than this (no newline for 64k characters) is shown in pieces."""


@frozen(slots=False)
class LogRead:
    """What one read of the log found, ready to show."""

    lines: tuple[str, ...] = ()
    """Complete lines as ``shown_line`` makes them."""
    restarted: bool = False
    """The log was truncated or replaced: what was shown before is gone."""
    skipped_bytes: int = 0
    missing: bool = False
    error: str | None = None


class LogFollower:
    """Reads what was added to a log since the last read, as whole decoded lines."""

    def __init__(
        self,
        path: str,
        *,
        first_read_bytes: int = FIRST_READ_BYTES,
        max_read_bytes: int = MAX_READ_BYTES,
    ) -> None:
        self.path = path
        self.first_read_bytes = first_read_bytes
        self.max_read_bytes = max_read_bytes
        self._offset: int | None = None
        self._identity: tuple[int, int] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._drop_first_line = False

    def read(self) -> LogRead:
        """Everything new since the last read (at most ``max_read_bytes`` of it)."""
        try:
            with open_log(self.path) as log:
                status = os.fstat(log.fileno())
                size = status.st_size
                identity = (status.st_dev, status.st_ino)
                restarted = self._restart_if_replaced(identity, size)
                skipped = self._skip_to_tail(size)
                assert self._offset is not None
                log.seek(self._offset)
                data = log.read(min(self.max_read_bytes, max(size - self._offset, 0)))
        except FileNotFoundError:
            return LogRead(missing=True)
        except OSError as error:
            return LogRead(error=error.strerror or str(error))
        self._offset += len(data)
        return LogRead(
            lines=self._lines(self._decoder.decode(data)),
            restarted=restarted,
            skipped_bytes=skipped,
        )

    def _restart_if_replaced(self, identity: tuple[int, int], size: int) -> bool:
        if self._offset is None:
            self._identity = identity
            self._offset = 0
            return False
        if identity == self._identity and size >= self._offset:
            return False
        self._identity, self._offset, self._partial = identity, 0, ""
        self._decoder.reset()
        return True

    def _skip_to_tail(self, size: int) -> int:
        """Move to the log's tail when too much is unread; how many bytes were skipped."""
        assert self._offset is not None
        first = self._offset == 0 and not self._partial
        keep = self.first_read_bytes if first else self.max_read_bytes
        behind = size - self._offset
        if behind <= keep:
            return 0
        skipped = behind - keep
        self._offset = size - keep
        self._decoder.reset()  # the skip may land inside a character: start afresh
        self._partial = ""
        self._drop_first_line = True  # ... and inside a line: show whole lines only
        return 0 if first else skipped

    def _lines(self, text: str) -> tuple[str, ...]:
        pieces = (self._partial + text).split("\n")
        partial = pieces.pop()
        while len(partial) > MAX_LINE_CHARS:  # no newline for too long: show it in pieces
            pieces.append(partial[:MAX_LINE_CHARS])
            partial = partial[MAX_LINE_CHARS:]
        self._partial = partial
        if self._drop_first_line and pieces:
            pieces.pop(0)
            self._drop_first_line = False
        return tuple(shown_line(piece) for piece in pieces)


def shown_line(line: str) -> str:
    """One line as a terminal leaves it (a progress bar's last non-empty rewrite; ``text\\r``
    keeps its text), every control character but tab and colours (SGR) made visible."""
    rewrites = [part for part in line.split("\r") if part]
    return clean_keeping_colours(rewrites[-1] if rewrites else "", keep="\t")


class TerminalLogFilter:
    """Log bytes for ``gputop jobs log``'s terminal, piece by piece: colours, ``\\r`` and
    ``\\b`` kept, every other control made visible; an unfinished character or colour
    sequence waits for the next piece."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""

    def feed(self, data: bytes) -> str:
        text, self._held = split_unfinished_sgr(self._held + self._decoder.decode(data))
        return clean_keeping_colours(text)

    def finish(self) -> str:
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return clean_keeping_colours(text)


# --- the cap --------------------------------------------------------------------------


DEFAULT_LOG_MAX_BYTES = settings.LOG_MAX.default
MIN_LOG_MAX_BYTES = 64 * 1024
MAX_LOG_MAX_BYTES = settings.LOG_MAX.maximum
FLOOR_TAIL_BYTES = 64 * 1024
CHECK_S = 0.5
_COPY_CHUNK = 1024**2
_MARK_DIGITS = 20


def size_text(value_bytes: int) -> str:
    """``1 GiB``, ``256 MiB``, ``64 KiB`` (whole units where they are), else bytes."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value_bytes >= size:
            return f"{value_bytes / size:.3g} {unit}"
    return f"{value_bytes} bytes"


def limits_from(environ: Mapping[str, str], log_max: int | None) -> tuple[int, int]:
    """(cap, floor) in bytes: ``--log-max``, else ``settings.LOG_MAX`` (out of range: the
    default); the floor from ``settings.LOG_FLOOR``."""
    cap = log_max if log_max is not None else settings.LOG_MAX.or_default(environ)
    if not MIN_LOG_MAX_BYTES <= cap <= MAX_LOG_MAX_BYTES:
        cap = DEFAULT_LOG_MAX_BYTES
    return cap, settings.LOG_FLOOR.or_default(environ)


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
        """Cut the log past the cap or when the disk is nearly full; what happened (for the
        log and the job's note) the first time and when the reason changes."""
        if self._fd is None:
            return None
        try:
            size = os.fstat(self._fd).st_size
            if _free_bytes(self._fd) < self.floor_bytes:
                head = self._mark_at
                head = min(self.max_bytes // 2, size // 2) if head is None else head
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
        mark_at = head if self._mark_at is None else self._mark_at
        keep_from = mark_at + len(mark)
        size = os.fstat(fd).st_size
        start = max(size - tail, keep_from)
        if start <= keep_from:
            return None
        start = _next_line(fd, start, size)
        write_at, read_at = keep_from, start
        # move the newest lines to just after the mark (the job may still be writing), then cut
        while read_at < (size := os.fstat(fd).st_size):
            chunk = os.pread(fd, min(_COPY_CHUNK, size - read_at), read_at)
            if not chunk:
                break
            os.pwrite(fd, chunk, write_at)
            write_at += len(chunk)
            read_at += len(chunk)
        self.cut_bytes += read_at - write_at + (len(mark) if first else 0)
        # The mark before the cut: a reader that sees the log under its cap sees the mark
        # too (written after, a reader between the two saw a cut log without it).
        os.pwrite(fd, mark_line(self.cut_bytes, self.max_bytes), mark_at)
        os.ftruncate(fd, write_at)
        self._mark_at = mark_at
        if first or why != self._why:
            self._why = why
            return f"{LOG_CUT_NOTE}: {why}; kept its beginning and newest lines (docs/faults.md)"
        return None


def _open_for_cutting(log_path: str) -> int | None:
    try:
        return open_checked_file(log_path, os.O_RDWR, "job log", create=False)
    except StoreError:
        return None


def _free_bytes(fd: int) -> int:
    info = os.fstatvfs(fd)
    return info.f_bavail * info.f_frsize


def _next_line(fd: int, start: int, size: int) -> int:
    """The start of the first whole line at or after ``start`` (``start`` if none near)."""
    window = os.pread(fd, min(64 * 1024, size - start), start)
    newline = window.find(b"\n")
    return start if newline < 0 else start + newline + 1
