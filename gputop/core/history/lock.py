"""One recorder per store: an exclusive lock beside it that names the pid holding it.

The lock is ``flock`` on ``<store>.lock``, so it is released by the kernel when the recorder
dies in any way (SIGKILL included) and never needs cleaning up; the file holds the holder's
pid only to name it to a second recorder.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from gputop.core.history.store import HistoryError
from gputop.core.private_files import Sharing, open_private_dir, open_private_file

MAX_PID_TEXT = 32


class RecorderBusy(HistoryError):
    """Another recorder holds the store."""


class RecorderLock:
    """Held from ``acquire`` until ``release`` (or the process's end)."""

    def __init__(self, store_path: Path, sharing: Sharing | None = None) -> None:
        self._store_path = Path(os.path.abspath(store_path))
        self._sharing = sharing
        """A shared store's directory stays shared; the lock file itself stays private."""
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self._store_path.with_name(self._store_path.name + ".lock")

    def acquire(self) -> None:
        """Take the lock (held already: nothing to do); refused with ``RecorderBusy``."""
        if self._fd is not None:
            return
        directory = self._store_path.parent
        dir_fd = open_private_dir(directory, store="history store", sharing=self._sharing)
        try:
            fd = open_private_file(
                dir_fd, directory, self.path.name, os.O_RDWR, "history recorder lock file"
            )
        finally:
            os.close(dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_pid(fd)
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise HistoryError(f"Cannot lock {self.path}: {error.strerror}.") from None
            who = f"pid {holder}" if holder is not None else "another process"
            raise RecorderBusy(
                f"Another recorder ({who}) is already recording into {self._store_path}: "
                "one recorder per store. Stop it first, or give --db PATH for another store."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, MAX_PID_TEXT, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() and len(text) < 12 else None
