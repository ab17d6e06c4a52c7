"""What the host knows about the pids NVML reports: user, command, CPU and memory.

Static facts of a process (user, command line, start time) are read once, when it is first
seen, and kept per (pid, start time). Each refresh then reads only what can change, CPU
time and resident memory, in one pass per process (one read of ``/proc/PID/stat`` on
Linux, see ``proc_counters``); that same read gives the start time, so a pid reused by a
new process is noticed and described afresh. CPU use is the CPU time between two refreshes
over the time between them: the first refresh of a process has none yet. Entries for pids
NVML no longer reports, or whose process ended, are dropped, so the cost per refresh
follows the number of GPU processes, not the history of the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import psutil

from gputop.core.model import ProcessOrigin
from gputop.core.process_control import boot_ticks
from gputop.core.sampling import proc_counters
from gputop.core.sampling.pid_namespace import LocalPidGuard
from gputop.core.sampling.process_env import CudaEnvironment, read_cuda_environment

FOREIGN_HINT = "not visible here: another PID namespace, e.g. a container"
DENIED_HINT = "no permission to read this process"


class HostFacts(NamedTuple):
    """Host-side facts about one pid; ``None`` where they could not be read.

    A named tuple, not a frozen dataclass: one is made for every GPU process at every
    refresh, and a frozen dataclass's ``__init__`` costs about five times as much (2.4
    against 0.5 µs for these nine fields, 200 processes a second; docs/speed.md)."""

    origin: ProcessOrigin
    user: str | None = None
    command: tuple[str, ...] = ()
    cpu_percent: float | None = None
    host_memory_bytes: int | None = None
    start_time: float | None = None
    hint: str | None = None
    environment: CudaEnvironment | None = None
    """Its CUDA and rank variables (gputop.core.sampling.process_env); None where unread."""
    start_ticks: int | None = None
    """Its start in clock ticks since boot, where ``/proc`` gives it (GpuProcess.start_ticks)."""


_new_facts = tuple.__new__
"""``HostFacts``'s own ``__new__`` without its Python frame, for all nine fields."""

SimulatedLookup = Callable[[int], "HostFacts | None"]
"""Describes a pid of a simulated GPU that does not exist on this host."""

_READ_COUNTERS = proc_counters.default_reader()
_MARK_IS_TICKS = _READ_COUNTERS is proc_counters.read_proc_stat
"""``/proc``'s counters give the start in clock ticks since boot (psutil's, a time)."""


@dataclass(slots=True)
class _Tracked:
    start_mark: float
    """The process's start as its counters give it: another value, another process."""
    create_time: float | None
    user: str | None
    command: tuple[str, ...]
    hint: str | None
    environment: CudaEnvironment | None = None
    cpu_time_s: float | None = None
    """CPU time at the previous refresh, and when that was (monotonic seconds)."""
    read_at: float = 0.0
    settled: bool = True
    """False while its command line read empty (caught mid-exec, or a kernel thread)."""
    start_ticks: int | None = None
    """``HostFacts.start_ticks``, worked out once."""


class HostProcessTable:
    """psutil lookups for GPU processes, cached across refreshes."""

    def __init__(
        self, simulated: SimulatedLookup | None = None, guard: LocalPidGuard | None = None
    ) -> None:
        self._tracked: dict[int, _Tracked] = {}
        self._stat_files = (
            proc_counters.StatFiles() if _READ_COUNTERS is proc_counters.read_proc_stat else None
        )
        """Each tracked process's ``/proc/PID/stat``, kept open between refreshes."""
        self._simulated = simulated
        self._guard = guard
        """Set in a nested PID namespace: see gputop.core.sampling.pid_namespace."""

    def describe(self, pids: Iterable[int]) -> dict[int, HostFacts]:
        """Facts for each pid, and forget the pids not asked about this time."""
        wanted = set(pids)
        for gone in self._tracked.keys() - wanted:
            del self._tracked[gone]
        if self._stat_files is not None:
            self._stat_files.keep_only(wanted)
        now = self.now()  # one reading of the clock for the refresh
        described = {pid: self._describe_one(pid, now) for pid in wanted}
        if self._guard is not None:
            local = {
                p: f.start_time for p, f in described.items() if f.origin is ProcessOrigin.HOST
            }
            for pid, hint in self._guard.refusals(local).items():
                described[pid] = HostFacts(ProcessOrigin.FOREIGN, hint=hint)
        return described

    def _describe_one(self, pid: int, now: float) -> HostFacts:
        try:
            # pid_exists is one kill(pid, 0): much cheaper than failing to read /proc for
            # every pid of another namespace on every refresh.
            if pid in self._tracked or psutil.pid_exists(pid):
                facts = self._live_facts(pid, now)
                if facts is not None:
                    return facts
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
        except (psutil.AccessDenied, PermissionError):
            self._tracked.pop(pid, None)
            return HostFacts(ProcessOrigin.HOST, hint=DENIED_HINT)
        self._tracked.pop(pid, None)
        if self._simulated is not None:
            simulated = self._simulated(pid)
            if simulated is not None:
                return simulated
        return HostFacts(ProcessOrigin.FOREIGN, hint=FOREIGN_HINT)

    @property
    def tracked_pids(self) -> frozenset[int]:
        """The live processes whose static facts are kept."""
        return frozenset(self._tracked)

    def read_counters(self, pid: int) -> proc_counters.Counters | None:
        """CPU time, memory and start of a live process; ``None`` once it has ended."""
        if self._stat_files is not None:
            return self._stat_files(pid)
        return _READ_COUNTERS(pid)

    def now(self) -> float:
        """Monotonic seconds, for CPU use between refreshes."""
        return time.monotonic()

    def _live_facts(self, pid: int, now: float) -> HostFacts | None:
        """``None`` when the process has ended; ``now``: the refresh's ``now()``."""
        counters = self.read_counters(pid)
        if counters is None:
            return None
        tracked = self._tracked.get(pid)
        if tracked is None or tracked.start_mark != counters.start_mark:
            tracked = self._track(pid, counters)  # a new process, or its pid was reused
        elif not tracked.settled:  # caught in the middle of its exec: read it again
            tracked = self._track(pid, counters, tracked)
        cpu_percent = None
        if tracked.cpu_time_s is not None and now > tracked.read_at:
            used_s = max(0.0, counters.cpu_time_s - tracked.cpu_time_s)
            cpu_percent = 100.0 * used_s / (now - tracked.read_at)
        tracked.cpu_time_s, tracked.read_at = counters.cpu_time_s, now
        return _new_facts(
            HostFacts,
            (
                ProcessOrigin.HOST,
                tracked.user,
                tracked.command,
                cpu_percent,
                counters.rss_bytes,
                tracked.create_time,
                tracked.hint,
                tracked.environment,
                tracked.start_ticks,
            ),
        )

    def _track(
        self, pid: int, counters: proc_counters.Counters, earlier: _Tracked | None = None
    ) -> _Tracked:
        """Read the facts that do not change while the process lives. A process read in
        the instant between its exec and the kernel setting up its arguments has an empty
        command line and environment: those are read again at its next refresh."""
        process = psutil.Process(pid)
        user: str | None
        command: tuple[str, ...]
        hint = None
        with process.oneshot():
            try:
                user = process.username()
            except (psutil.AccessDenied, KeyError):
                user = None
            settled = True
            try:
                command = tuple(process.cmdline())
                if not command:
                    command, settled = (f"[{process.name()}]",), False
            except psutil.AccessDenied:
                command, hint = (), DENIED_HINT
            create_time = process.create_time()
        # Read once per (pid, start): an environment never changes after exec.
        environment = read_cuda_environment(pid)
        tracked = _Tracked(
            counters.start_mark,
            create_time,
            user,
            command,
            hint,
            environment,
            settled=settled,
            start_ticks=boot_ticks(int(counters.start_mark)) if _MARK_IS_TICKS else None,
        )
        if earlier is not None:  # the same process: its CPU counter goes on
            tracked.cpu_time_s, tracked.read_at = earlier.cpu_time_s, earlier.read_at
        self._tracked[pid] = tracked
        return tracked
