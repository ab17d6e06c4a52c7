"""Following a job's log: complete lines, decoded incrementally, safe for a terminal.

The dashboard's log view and ``gputop jobs log`` read a log that another process is still
writing. Reads end anywhere, often in the middle of a UTF-8 character (tqdm's bars are made
of three-byte block characters), so bytes are decoded with an incremental decoder that
keeps an unfinished character for the next read. A read is capped: a job that writes
faster than the view can follow makes the view skip ahead (and say how much it skipped),
never read gigabytes in one tick. See docs/security.md.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass

from gputop.core.jobs.logs import open_log
from gputop.core.safe_text import clean_keeping_colours, split_unfinished_sgr

FIRST_READ_BYTES = 256 * 1024
"""How much of an existing log to show at first: its end, like ``tail``."""
MAX_READ_BYTES = 1024 * 1024
"""The most one read takes in; what is more than this behind is skipped."""
MAX_LINE_CHARS = 64 * 1024
"""A line longer than this (no newline for 64k characters) is shown in pieces."""


@dataclass(frozen=True)
class LogRead:
    """What one read of the log found, ready to show."""

    lines: tuple[str, ...] = ()
    """Complete lines as a terminal would leave them (the text after a progress bar's last
    ``\\r``), every control character but tab and colour sequences (SGR) made visible."""
    restarted: bool = False
    """The log was truncated or replaced: what was shown before is gone."""
    skipped_bytes: int = 0
    """Output skipped because the job wrote faster than the view reads."""
    missing: bool = False
    """There is no log (yet)."""
    error: str | None = None
    """Why the log could not be read (for example, no permission)."""


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
    """One line of output as a terminal leaves it, safe to show.

    A progress bar rewrites its line with ``\\r``: the last non-empty rewrite is what a
    terminal would show (``"text\\r"`` from Windows line ends keeps its text).
    """
    rewrites = [part for part in line.split("\r") if part]
    return clean_keeping_colours(rewrites[-1] if rewrites else "", keep="\t")


class TerminalLogFilter:
    """Log bytes for a terminal, piece by piece: colours and line control, nothing else.

    ``gputop jobs log`` copies a log to the terminal as it grows; this keeps the job's
    colours and its progress bars (``\\r``, ``\\b``) and shows every other control
    character as a visible escape. A piece may end inside a character or a colour
    sequence: that end waits for the next piece.
    """

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
