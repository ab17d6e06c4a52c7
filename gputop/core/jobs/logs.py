"""Job logs: private files, appended to by the supervisor, read by the CLI and the dashboard.

A log holds the job's own output (stdout and stderr, interleaved as written) and a few lines
gputop adds itself, each starting with ``[gputop]``: what it waited for, when the job
started on which cards, how it ended. Readers that want "the job's last line" skip those.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

LOG_PREFIX = "[gputop] "
PRIVATE_FILE_MODE = 0o600


def open_private_append(path: str | os.PathLike[str]) -> int:
    """A file descriptor appending to ``path``, created 0600 (never readable by others)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, PRIVATE_FILE_MODE)
    except OSError:
        pass
    return fd


def gputop_line(text: str) -> bytes:
    """One line gputop writes into a job's log, stamped with the local time."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"{LOG_PREFIX}{stamp} {text}\n".encode(errors="replace")


def append_gputop_line(path: str | os.PathLike[str], text: str) -> None:
    """Append one gputop line; a log that cannot be written must not stop the supervisor."""
    try:
        fd = open_private_append(path)
    except OSError:
        return
    try:
        os.write(fd, gputop_line(text))
    except OSError:
        pass
    finally:
        os.close(fd)


def last_line(path: str | os.PathLike[str], tail_bytes: int = 16384) -> str | None:
    """The job's last non-empty output line; gputop's own lines only when it printed none.

    Progress bars rewrite a line with ``\\r``: the text after the last ``\\r`` is what a
    terminal would show.
    """
    try:
        with open(path, "rb") as handle:
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


def log_exists(path: str) -> bool:
    return Path(path).is_file()
