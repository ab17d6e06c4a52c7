"""Job logs: private files, appended to by the supervisor, read by the CLI and the dashboard.

A log holds the job's own output (stdout and stderr, interleaved as written) and a few lines
gputop adds itself, each starting with ``[gputop]``: what it waited for, when the job
started on which cards, how it ended. Readers that want "the job's last line" skip those.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import BinaryIO

from gputop.core.safe_text import clean

LOG_PREFIX = "[gputop] "


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """A job's log opened for reading: never through a symbolic link, only a regular file.

    O_NONBLOCK keeps a FIFO planted in the log's place from blocking the reader; the check
    after opening refuses anything but a plain file (docs/security.md).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def gputop_line(text: str) -> bytes:
    """One line gputop writes into a job's log, stamped with the local time.

    The whole text is cleaned (``safe_text.clean``): it quotes job names, commands, paths
    and error messages, and a log is shown on terminals that keep its colours
    (docs/security.md), so no ESC, newline or undecodable byte of theirs gets in: the line
    is one line of valid UTF-8 with nothing a terminal obeys."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"{LOG_PREFIX}{stamp} {clean(text)}\n".encode()


def last_line(path: str | os.PathLike[str], tail_bytes: int = 16384) -> str | None:
    """The job's last non-empty output line; gputop's own lines only when it printed none.

    Progress bars rewrite a line with ``\\r``: the text after the last ``\\r`` is what a
    terminal would show.
    """
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
