"""What changes about a process from one refresh to the next: CPU time and resident memory.

On Linux one read of ``/proc/PID/stat`` gives all of it, with the process's start time in
clock ticks since boot: the same pid with another start time is another process (the pid
was reused). Elsewhere psutil reads the same three things in one ``oneshot()``.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable, Collection
from typing import NamedTuple

import psutil

_PROC = "/proc"


class Counters(NamedTuple):
    """A named tuple: one is read for every GPU process at every refresh."""

    cpu_time_s: float
    """User plus system CPU time since the process started."""
    rss_bytes: int
    start_mark: float
    """When the process started, in a unit of the reader's own: equal marks, same process."""


CounterReader = Callable[[int], "Counters | None"]
"""Counters of a live process; ``None`` if it has ended (or is a zombie)."""


def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


TICKS_PER_S = _clock_ticks()
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STAT_BYTES = 8192
_new_counters = tuple.__new__
"""``Counters``'s own ``__new__`` without its Python frame (every GPU process, every refresh)."""


def read_proc_stat(pid: int) -> Counters | None:
    """One read of ``/proc/PID/stat`` (see proc(5) for the fields).

    Through ``os.open``/``os.read``, not a buffered file object: half the cost, for every
    GPU process every second. The line is well under ``_STAT_BYTES``.
    """
    try:
        fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        line = os.read(fd, _STAT_BYTES)
    except ProcessLookupError:  # the process ended between the open and the read
        return None
    finally:
        os.close(fd)
    return _parse_stat(line)


def _parse_stat(line: bytes) -> Counters | None:
    """The counters of a ``/proc/PID/stat`` line; None for an empty one or a zombie."""
    if not line:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and parentheses.
    # Fields 3 to 24 are split off, not the thirty after them.
    fields = line[line.rindex(b")") + 2 :].split(None, 22)
    if fields[0] in (b"Z", b"X"):  # field 3, the state: zombie or dead
        return None
    return _new_counters(
        Counters,
        (
            (int(fields[11]) + int(fields[12])) / TICKS_PER_S,  # fields 14 and 15
            int(fields[21]) * _PAGE_BYTES,  # field 24, in pages
            float(fields[19]),  # field 22, ticks since boot
        ),
    )


def read_psutil(pid: int) -> Counters | None:
    """The same through psutil, for systems without ``/proc``."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            times = process.cpu_times()
            return Counters(
                cpu_time_s=times.user + times.system,
                rss_bytes=process.memory_info().rss,
                start_mark=process.create_time(),
            )
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


def default_reader() -> CounterReader:
    return read_proc_stat if os.path.exists(f"{_PROC}/self/stat") else read_psutil


KEPT_FILES = 256
"""``/proc/PID/stat`` files a ``StatFiles`` keeps open at most (a quarter of the usual
limit of 1024 descriptors); further processes are read with an open and a close."""


class StatFiles:
    """``read_proc_stat`` with each process's file kept open between reads (``pread``): an
    open and a close are half the cost of a read, paid for every GPU process every second.

    A kept file names one process, not a pid: once that process is reaped its file reads
    "no such process", and the pid, if reused, is opened again for the new process. A
    zombie's file is closed. ``keep_only`` closes the files of processes no longer asked
    about; every file is closed when this object is (``close``) or collected.
    """

    def __init__(self, limit: int = KEPT_FILES) -> None:
        self._limit = limit
        self._files: dict[int, int] = {}
        self._finalizer = weakref.finalize(self, _close_all, self._files)

    def __call__(self, pid: int) -> Counters | None:
        kept = self._files.get(pid)
        if kept is not None:
            try:
                line = os.pread(kept, _STAT_BYTES, 0)
            except OSError:  # its process was reaped (ESRCH)
                line = b""
            counters = _parse_stat(line)
            if counters is not None:
                return counters
            self._forget(pid)
            if line:  # a zombie: nothing to read again
                return None
        try:
            fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            return None
        try:
            counters = _parse_stat(os.read(fd, _STAT_BYTES))
        except ProcessLookupError:
            counters = None
        if counters is not None and len(self._files) < self._limit:
            self._files[pid] = fd
        else:
            os.close(fd)
        return counters

    @property
    def kept(self) -> frozenset[int]:
        """The pids whose files are open."""
        return frozenset(self._files)

    def keep_only(self, pids: Collection[int]) -> None:
        """Close the files of every process but ``pids``."""
        for pid in [pid for pid in self._files if pid not in pids]:
            self._forget(pid)

    def close(self) -> None:
        self._finalizer()

    def _forget(self, pid: int) -> None:
        fd = self._files.pop(pid, None)
        if fd is not None:
            os.close(fd)


def _close_all(files: dict[int, int]) -> None:
    for fd in files.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    files.clear()
