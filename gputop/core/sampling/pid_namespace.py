"""NVML's pids are the host's: inside a nested PID namespace, trust a local match only if proven.

The driver reports every GPU process by its pid in the *initial* PID namespace. gputop in a
container (its own PID namespace) looks those numbers up among its own processes, where the
same number may belong to an unrelated process: a shell, a data loader, the container's
init. Showing that process's user and command as the GPU process's, or signalling it, would
be wrong. So, only when gputop runs in a nested PID namespace, a local process is accepted
as NVML's only while it holds a ``/dev/nvidia*`` device open (every CUDA process does), seen
through ``/proc/PID/fd``; otherwise it is shown as foreign and never signalled.

Detection: ``/proc/self/ns/pid`` of the initial PID namespace has the inode
``PROC_PID_INIT_INO`` (0xEFFFFFFC, fixed since Linux 3.8); another inode means a nested one.
``NSpid`` in ``/proc/self/status`` with more than one pid says the same where /proc is the
host's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from gputop.core.records import frozen

INIT_PID_NAMESPACE_INODE = 0xEFFFFFFC
"""The kernel's PROC_PID_INIT_INO: the inode of the initial PID namespace."""
RECHECK_REFUSED_AFTER_S = 10.0
"""A refused process is looked at again after this long (it may open the device later)."""

NO_DEVICE_HINT = (
    "another process here has this pid: NVML reports host pids and gputop runs in a nested "
    "PID namespace (a container); the local process has no /dev/nvidia* device open"
)
UNREADABLE_HINT = (
    "NVML reports host pids and gputop runs in a nested PID namespace (a container); the "
    "local process with this pid could not be checked (no permission to read its open files)"
)


@frozen
class PidNamespace:
    nested: bool
    """True when this process is not in the initial (host) PID namespace."""
    inode: int | None
    """Inode of /proc/self/ns/pid; None where it could not be read."""


def detect_pid_namespace(proc: str = "/proc") -> PidNamespace:
    """Which PID namespace gputop runs in: the host's, or a nested one."""
    inode: int | None
    try:
        inode = os.stat(f"{proc}/self/ns/pid").st_ino
    except OSError:
        inode = None
    nested = inode is not None and inode != INIT_PID_NAMESPACE_INODE
    return PidNamespace(nested=nested or _nspid_depth(proc) > 1, inode=inode)


def _nspid_depth(proc: str) -> int:
    """How many pids ``NSpid`` lists for this process (1 in the namespace /proc shows)."""
    try:
        with open(f"{proc}/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return 1


def holds_nvidia_device(pid: int, proc: str = "/proc") -> bool | None:
    """True if one of ``pid``'s open files is a ``/dev/nvidia*`` device; None if unreadable."""
    folder = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(folder)
    except PermissionError:
        return None
    except OSError:  # ended meanwhile
        return False
    for name in names:
        try:
            target = os.readlink(f"{folder}/{name}")
        except PermissionError:
            return None
        except OSError:  # that descriptor was closed meanwhile
            continue
        if target.startswith("/dev/nvidia"):
            return True
    return False


class LocalPidGuard:
    """Decides, in a nested PID namespace, which local processes NVML's pids really are.

    Verdicts are kept per (pid, start time): an accepted process stays accepted, a refused
    one is checked again after ``recheck_after_s``; pids no longer asked about are forgotten.
    """

    def __init__(
        self,
        *,
        proc: str = "/proc",
        recheck_after_s: float = RECHECK_REFUSED_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._proc = proc
        self._recheck_after_s = recheck_after_s
        self._clock = clock
        self._verdicts: dict[tuple[int, float | None], tuple[str | None, float]] = {}

    def refusals(self, start_times: Mapping[int, float | None]) -> dict[int, str]:
        """For the local processes matched to NVML pids (pid -> start time): pid -> hint."""
        wanted = set(start_times.items())
        for key in self._verdicts.keys() - wanted:
            del self._verdicts[key]
        refused: dict[int, str] = {}
        now = self._clock()
        for key in wanted:
            kept = self._verdicts.get(key)
            if kept is None or (kept[0] is not None and now - kept[1] >= self._recheck_after_s):
                kept = (self._verdict(key[0]), now)
                self._verdicts[key] = kept
            if kept[0] is not None:
                refused[key[0]] = kept[0]
        return refused

    def _verdict(self, pid: int) -> str | None:
        holds = holds_nvidia_device(pid, self._proc)
        if holds is None:
            return UNREADABLE_HINT
        return None if holds else NO_DEVICE_HINT


def local_pid_guard(proc: str = "/proc") -> LocalPidGuard | None:
    """A guard where gputop runs in a nested PID namespace; None (nothing to check) elsewhere."""
    return LocalPidGuard(proc=proc) if detect_pid_namespace(proc).nested else None
