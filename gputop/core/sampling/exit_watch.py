"""Which watched processes have ended, for all of them in one system call (Linux pidfds).

A pidfd (``pidfd_open``) names one process, not a pid: it becomes readable when that process
exits and stays so, whoever takes the pid afterwards. So a process whose pidfd was opened
before its ``/proc`` facts were read, and that is not readable now, is still the process
those facts describe: not the pid's next owner. One ``poll`` of every pidfd says so for all
of them. That proof, not a clock, is what lets the host's view of a process that is not on
screen be carried over from an earlier refresh (gputop.core.sampling.host_processes).

Where there are no pidfds (not Linux, a kernel before 5.3, a sandbox that refuses the call,
or the descriptors' limit reached) a process is simply not watched, and not watched is
read every refresh, as before.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import weakref
from collections.abc import Collection

WATCHED_MAX = 256
"""Pidfds kept open at most, as many as the kept ``/proc/PID/stat`` files
(proc_counters.KEPT_FILES); an eighth of a lower descriptor limit where there is one."""


def _limit() -> int:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        return WATCHED_MAX
    return max(0, min(WATCHED_MAX, soft // 8))


class ExitWatch:
    """A pidfd per watched pid, polled together (``ended``)."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = _limit() if limit is None else limit
        self._fds: dict[int, int] = {}
        """pid -> its pidfd."""
        self._pids: dict[int, int] = {}
        """pidfd -> its pid."""
        self._poll = select.poll()
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    @staticmethod
    def available() -> bool:
        return hasattr(os, "pidfd_open") and hasattr(select, "poll")

    def watch(self, pid: int) -> bool:
        """Watch ``pid``'s process as it is now (before its facts are read); False where it
        cannot be watched (ended already, no pidfds, the limit reached): read it each time."""
        if pid in self._fds:
            return True
        if len(self._fds) >= self._limit:
            return False
        try:
            fd = os.pidfd_open(pid)
        except (OSError, OverflowError, ValueError):  # ESRCH, ENOSYS, EMFILE, EPERM; no pid
            return False
        self._fds[pid], self._pids[fd] = fd, pid
        self._poll.register(fd, select.POLLIN)
        return True

    def watched(self, pid: int) -> bool:
        return pid in self._fds

    def ended(self) -> set[int]:
        """The watched pids whose process has ended (a zombie too) since it was watched;
        they are no longer watched. One ``poll``, with no wait, for all of them."""
        if not self._fds:
            return set()
        try:
            ready = self._poll.poll(0)
        except OSError:  # no answer: none can be proved alive
            ready = [(fd, select.POLLIN) for fd in self._pids]
        ended = set()
        for fd, _ in ready:
            pid = self._pids.get(fd)
            if pid is not None:
                ended.add(pid)
                self._forget(pid)
        return ended

    def keep_only(self, pids: Collection[int]) -> None:
        """Stop watching every pid but ``pids``."""
        for pid in [pid for pid in self._fds if pid not in pids]:
            self._forget(pid)

    @property
    def count(self) -> int:
        return len(self._fds)

    def close(self) -> None:
        self._pids.clear()
        self._finalizer()

    def _forget(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            del self._pids[fd]
            with contextlib.suppress(KeyError, ValueError):
                self._poll.unregister(fd)
            os.close(fd)


def _close_all(fds: dict[int, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()
