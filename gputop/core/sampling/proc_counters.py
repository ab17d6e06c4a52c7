"""What changes about a process from one refresh to the next: CPU time and resident memory.

On Linux one read of ``/proc/PID/stat`` gives all of it, with the process's start time in
clock ticks since boot: the same pid with another start time is another process (the pid
was reused). Elsewhere psutil reads the same three things in one ``oneshot()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import psutil

_PROC = "/proc"


@dataclass(frozen=True, slots=True)
class Counters:
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


_TICKS_PER_S = _clock_ticks()
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STAT_BYTES = 8192


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
    if not line:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and parentheses.
    fields = line[line.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # field 3, the state: zombie or dead
        return None
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15
    return Counters(
        cpu_time_s=(utime + stime) / _TICKS_PER_S,
        rss_bytes=int(fields[21]) * _PAGE_BYTES,  # field 24, in pages
        start_mark=float(fields[19]),  # field 22, ticks since boot
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
