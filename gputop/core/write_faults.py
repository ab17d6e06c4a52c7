"""A full or read-only disk: told apart from every other failure, and said once.

gputop keeps state on disk (the job store, job logs, and later the history recorder). A
full disk, a full quota or a file system remounted read-only is not damage and not a bug:
what was written is intact, reading still works, and writing will work again when space
returns. Every writer of gputop's state classifies its errors here and reports a fault
through one ``FaultReporter``: said once when it starts, once when writing works again,
never once per failed write (docs/faults.md).
"""

from __future__ import annotations

import enum
import errno
import os
import sqlite3
import threading
from collections.abc import Callable

_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
LOW_SPACE_BYTES = 256 * 1024
"""Below this much free space a disk counts as full: SQLite needs a few pages to write."""


class WriteFault(str, enum.Enum):
    """Why nothing can be written now."""

    FULL = "full"
    READ_ONLY = "read-only"

    def describe(self, what: str) -> str:
        """``the disk holding WHAT is full`` / ``WHAT is on a read-only file system``."""
        if self is WriteFault.FULL:
            return f"the disk (or your quota) holding {what} is full"
        return f"{what} is on a read-only file system"


_ERRNO_FAULTS = {
    errno.ENOSPC: WriteFault.FULL,
    errno.EDQUOT: WriteFault.FULL,
    errno.EROFS: WriteFault.READ_ONLY,
}


def write_fault_of(
    error: BaseException, where: str | os.PathLike[str] | None = None
) -> WriteFault | None:
    """The fault an error from writing (``OSError`` or ``sqlite3.Error``) shows, if any.

    SQLite reports a failed write to its ``-shm`` or ``-wal`` file as a "disk I/O error"
    or "unable to open database file": with ``where`` (the directory it writes in), such
    an error is a fault when that file system is full or read-only now.
    """
    if isinstance(error, OSError):
        return _ERRNO_FAULTS.get(error.errno or 0)
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        if isinstance(code, int):
            primary = code & 0xFF
            if primary == _SQLITE_FULL:
                return WriteFault.FULL
            if primary == _SQLITE_READONLY:
                return WriteFault.READ_ONLY
            if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and where is not None:
                return fault_at(where)
        text = str(error).lower()
        if "disk is full" in text:
            return WriteFault.FULL
        if "readonly database" in text or "read-only file system" in text:
            return WriteFault.READ_ONLY
    return None


def fault_at(path: str | os.PathLike[str]) -> WriteFault | None:
    """The fault the file system holding ``path`` shows now (read-only, under
    LOW_SPACE_BYTES free for this user, or no inode left for a new file: SQLite must make
    its ``-wal`` and ``-shm`` files to open a store), else ``None``."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return WriteFault.READ_ONLY
    if info.f_bavail * info.f_frsize < LOW_SPACE_BYTES:
        return WriteFault.FULL
    if info.f_files and not info.f_favail:  # f_files 0: the file system sets no limit
        return WriteFault.FULL
    return None


class FaultReporter:
    """Says a write fault once, and once that writing works again.

    ``say`` receives each message (a CLI prints it, the dashboard notifies it). Thread
    safe: a store is shared between threads.
    """

    def __init__(self, what: str, consequence: str, say: Callable[[str], None]) -> None:
        self.what = what
        """What cannot be written, for a person: ``the job store /path``."""
        self.consequence = consequence
        """What the fault means for the user (what goes on, what waits)."""
        self._say = say
        self._lock = threading.Lock()
        self.fault: WriteFault | None = None

    def failed(self, fault: WriteFault) -> None:
        """A write failed for ``fault``: said the first time (or when the fault changes)."""
        with self._lock:
            if self.fault is fault:
                return
            self.fault = fault
        self._say(f"Cannot write {self.what}: {fault.describe('it')}. {self.consequence}")

    def succeeded(self) -> None:
        """A write worked: said once after a fault."""
        with self._lock:
            if self.fault is None:
                return
            self.fault = None
        self._say(f"{self.what[0].upper()}{self.what[1:]} can be written again.")
