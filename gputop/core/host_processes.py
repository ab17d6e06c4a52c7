"""What the host knows about the pids NVML reports: user, command, CPU and memory.

psutil's ``cpu_percent()`` measures the CPU time since the previous call on the same
``Process`` object, so objects are kept per (pid, create time) across refreshes: the first
reading primes the counter, later ones are real deltas. Static facts (user, command line,
start time) are read once per process. Entries for pids NVML no longer reports are dropped,
so the cost per refresh follows the number of GPU processes, not the history of the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from gputop.core.model import ProcessOrigin
from gputop.core.pid_namespace import LocalPidGuard

FOREIGN_HINT = "not visible here (another PID namespace, e.g. a container)"
DENIED_HINT = "no permission to read this process"


@dataclass(frozen=True, slots=True)
class HostFacts:
    """Host-side facts about one pid; ``None`` where they could not be read."""

    origin: ProcessOrigin
    user: str | None = None
    command: tuple[str, ...] = ()
    cpu_percent: float | None = None
    host_memory_bytes: int | None = None
    start_time: float | None = None
    hint: str | None = None


SimulatedLookup = Callable[[int], "HostFacts | None"]
"""Describes a pid of a simulated GPU that does not exist on this host."""


@dataclass(slots=True)
class _Tracked:
    process: psutil.Process
    create_time: float
    user: str | None
    command: tuple[str, ...]
    hint: str | None
    primed: bool = False


class HostProcessTable:
    """psutil lookups for GPU processes, cached across refreshes."""

    def __init__(
        self, simulated: SimulatedLookup | None = None, guard: LocalPidGuard | None = None
    ) -> None:
        self._tracked: dict[int, _Tracked] = {}
        self._simulated = simulated
        self._guard = guard
        """Set in a nested PID namespace: see gputop.core.pid_namespace."""

    def describe(self, pids: Iterable[int]) -> dict[int, HostFacts]:
        """Facts for each pid, and forget the pids not asked about this time."""
        wanted = set(pids)
        for gone in self._tracked.keys() - wanted:
            del self._tracked[gone]
        described = {pid: self._describe_one(pid) for pid in wanted}
        if self._guard is not None:
            local = {
                p: f.start_time for p, f in described.items() if f.origin is ProcessOrigin.HOST
            }
            for pid, hint in self._guard.refusals(local).items():
                described[pid] = HostFacts(ProcessOrigin.FOREIGN, hint=hint)
        return described

    def _describe_one(self, pid: int) -> HostFacts:
        try:
            # pid_exists is one kill(pid, 0): much cheaper than failing to read /proc for
            # every pid of another namespace on every refresh.
            if pid in self._tracked or psutil.pid_exists(pid):
                return self._live_facts(pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
        except psutil.AccessDenied:
            self._tracked.pop(pid, None)
            return HostFacts(ProcessOrigin.HOST, hint=DENIED_HINT)
        self._tracked.pop(pid, None)
        if self._simulated is not None:
            simulated = self._simulated(pid)
            if simulated is not None:
                return simulated
        return HostFacts(ProcessOrigin.FOREIGN, hint=FOREIGN_HINT)

    def _live_facts(self, pid: int) -> HostFacts:
        tracked = self._tracked.get(pid)
        if tracked is not None and not tracked.process.is_running():
            tracked = None  # the process ended and its pid was reused
        if tracked is None:
            tracked = self._track(pid, psutil.Process(pid))
        process = tracked.process
        with process.oneshot():
            # The first call only primes psutil's counter; a delta needs a second one.
            cpu_percent = process.cpu_percent() if tracked.primed else None
            tracked.primed = True
            rss = process.memory_info().rss
        return HostFacts(
            ProcessOrigin.HOST,
            user=tracked.user,
            command=tracked.command,
            cpu_percent=cpu_percent,
            host_memory_bytes=rss,
            start_time=tracked.create_time,
            hint=tracked.hint,
        )

    def _track(self, pid: int, process: psutil.Process) -> _Tracked:
        user: str | None
        command: tuple[str, ...]
        hint = None
        try:
            user = process.username()
        except (psutil.AccessDenied, KeyError):
            user = None
        try:
            command = tuple(process.cmdline()) or (f"[{process.name()}]",)
        except psutil.AccessDenied:
            command, hint = (), DENIED_HINT
        process.cpu_percent()
        tracked = _Tracked(process, process.create_time(), user, command, hint)
        self._tracked[pid] = tracked
        return tracked
