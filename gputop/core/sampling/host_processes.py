"""What the host knows about the pids NVML reports: user, command, CPU and memory.

Static facts of a process (user, command line, start time) are read once, when it is first
seen, and kept per (pid, start time). Each refresh then reads only what can change, CPU
time and resident memory, in one pass per process (one read of ``/proc/PID/stat`` on
Linux, see ``proc_counters``); that same read gives the start time, so a pid reused by a
new process is noticed and described afresh. CPU use is the CPU time between two refreshes
over the time between them: the first refresh of a process has none yet. Entries for pids
NVML no longer reports, or whose process ended, are dropped, so the cost per refresh
follows the number of GPU processes, not the history of the machine.

A dashboard shows a few dozen of a busy server's hundreds of processes: it names those it
shows (``shown``), and the others' CPU and memory are carried over from a refresh at most
``CARRY_S`` ago, but only where a pidfd opened before that read proves the process has not
ended since (gputop.core.sampling.exit_watch): a pid reused in between is read afresh.
Without pidfds, or with ``shown`` None (every other reader: the exporter, snapshots, the
lab's agent), every process is read every refresh.
"""

from __future__ import annotations

import os
import pwd
import sys
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import psutil

from gputop.core.model import ProcessOrigin
from gputop.core.process_control import boot_ticks, pid_exists
from gputop.core.records import mutable
from gputop.core.sampling import proc_counters
from gputop.core.sampling.exit_watch import ExitWatch
from gputop.core.sampling.pid_namespace import LocalPidGuard
from gputop.core.sampling.process_env import CudaEnvironment, read_cuda_environment

CARRY_S = 5.0
"""A process not shown is read at least this often (monotonic seconds): what it shows when
it scrolls into view is at most this old, for a refresh."""

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
"""``/proc``'s counters give the start in clock ticks since boot (psutil's, a time); there
a new process's static facts are read from ``/proc`` directly too (``_ProcReading``)."""


@mutable(slots=True)
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
    facts: HostFacts | None = None
    """What its last read found, carried over while it is not shown (``CARRY_S``)."""


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
        self._reading = _ProcReading()
        self._exits = (
            ExitWatch() if self._stat_files is not None and ExitWatch.available() else None
        )
        """A pidfd per tracked process: whether it ended, for all in one call."""
        self.shown: frozenset[int] | None = None
        """The pids read at every refresh; the others are carried over while provably the
        same process (None: all are read). Set from another thread (the dashboard's): one
        reference, read once a refresh."""

    def describe(self, pids: Iterable[int]) -> dict[int, HostFacts]:
        """Facts for each pid, and forget the pids not asked about this time."""
        wanted = set(pids)
        for gone in self._tracked.keys() - wanted:
            del self._tracked[gone]
        if self._stat_files is not None:
            self._stat_files.keep_only(wanted)
        now = self.now()  # one reading of the clock for the refresh
        self._reading = _ProcReading()  # user names and the boot time read afresh
        exits, shown = self._exits, self.shown
        if exits is None:
            described = {pid: self._describe_one(pid, now) for pid in wanted}
        else:
            described = self._described_watched(wanted, now, exits, shown)
        if self._guard is not None:
            local = {
                p: f.start_time for p, f in described.items() if f.origin is ProcessOrigin.HOST
            }
            for pid, hint in self._guard.refusals(local).items():
                described[pid] = HostFacts(ProcessOrigin.FOREIGN, hint=hint)
        return described

    def _described_watched(
        self, wanted: set[int], now: float, exits: ExitWatch, shown: frozenset[int] | None
    ) -> dict[int, HostFacts]:
        """``describe``'s facts where pidfds say which processes ended: a process not shown,
        read less than ``CARRY_S`` ago, whose pidfd (opened before that read) says it has
        not ended, keeps that read's facts; every other one is watched, then read. A pid
        whose process ended is described afresh even where the next one started in the
        same clock tick (the start time, in ticks, cannot tell them apart)."""
        ended = exits.ended()
        tracked_now = self._tracked
        for pid in ended:  # whatever has this pid now is another process, whatever its start
            tracked_now.pop(pid, None)
        described: dict[int, HostFacts] = {}
        for pid in wanted:
            if shown is not None and pid not in shown and pid not in ended:
                tracked = tracked_now.get(pid)
                if (
                    tracked is not None
                    and tracked.facts is not None
                    and now - tracked.read_at < CARRY_S
                    and exits.watched(pid)
                ):
                    described[pid] = tracked.facts
                    continue
            exits.watch(pid)  # before the read: a pid reused after it shows as ended
            described[pid] = self._describe_one(pid, now)
        exits.keep_only(tracked_now)
        return described

    def close(self) -> None:
        """Close the kept files and pidfds (they are closed when this is collected too)."""
        if self._stat_files is not None:
            self._stat_files.close()
        if self._exits is not None:
            self._exits.close()

    def _describe_one(self, pid: int, now: float) -> HostFacts:
        try:
            # kill(pid, 0) is much cheaper than failing to read /proc for every pid of
            # another namespace on every refresh.
            if pid in self._tracked or pid_exists(pid):
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
        tracked.facts = facts = _new_facts(
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
        return facts

    def _track(
        self, pid: int, counters: proc_counters.Counters, earlier: _Tracked | None = None
    ) -> _Tracked:
        """Read the facts that do not change while the process lives. A process read in
        the instant between its exec and the kernel setting up its arguments has an empty
        command line and environment: those are read again at its next refresh."""
        static = self._reading.static(pid, counters.start_mark) if _MARK_IS_TICKS else None
        if static is None:
            static = _psutil_static(pid)
        user, command, hint, settled, create_time = static
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


_Static = tuple[str | None, tuple[str, ...], str | None, bool, float | None]
"""A process's user, command, hint, whether its command line was settled, and its start."""


def _psutil_static(pid: int) -> _Static:
    """``_Static`` as psutil reads it (where there is no ``/proc``, or the command line
    read empty: psutil then names the process)."""
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
    return user, command, hint, settled, create_time


_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class _ProcReading:
    """A new process's static facts from two reads of ``/proc`` (``status`` and
    ``cmdline``), the same values psutil gives for them (its username, cmdline and
    create_time; tests/unit/test_host_processes.py compares), at a quarter of its cost:
    200 new processes in 7 ms against 27, the first sample of a busy server. The user names
    and the boot time are read once per refresh (psutil reads each for every process)."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}
        self._boot_time: float | None = None

    def static(self, pid: int, start_ticks: float) -> _Static | None:
        """Raises ``psutil.NoSuchProcess`` where the process ended or ``pid`` is a thread
        of another process; ``None`` where its command line reads empty."""
        user: str | None = None
        try:
            status = _read_whole(f"/proc/{pid}/status")
            if _status_number(status, b"\nTgid:") != pid:  # a thread, as pid_exists says
                raise psutil.NoSuchProcess(pid)
            uid = _status_number(status, b"\nUid:")
            user = None if uid is None else self._user(uid)
        except PermissionError:
            pass
        hint = None
        try:
            command = _split_command_line(_read_whole(f"/proc/{pid}/cmdline"))
            if not command:
                return None
        except PermissionError:
            command, hint = (), DENIED_HINT
        if self._boot_time is None:
            self._boot_time = psutil.boot_time()
        started = start_ticks / proc_counters.TICKS_PER_S + self._boot_time  # as psutil
        return user, command, hint, True, started

    def _user(self, uid: int) -> str:
        name = self._names.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:  # as psutil: a uid with no name is named by its number
                name = str(uid)
            self._names[uid] = name
        return name


def _read_whole(path: str) -> bytes:
    """All of a ``/proc`` file; ``psutil.NoSuchProcess`` once the process has ended."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError) as error:
        raise psutil.NoSuchProcess(0) from error
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except ProcessLookupError as error:
        raise psutil.NoSuchProcess(0) from error
    finally:
        os.close(fd)


def _status_number(status: bytes, key: bytes) -> int | None:
    """The first number of ``key``'s line in ``/proc/PID/status`` (key with its newline)."""
    start = status.find(key)
    if start < 0:
        return None
    end = status.find(b"\n", start + 1)
    words = status[start + len(key) : end if end >= 0 else None].split()
    return int(words[0]) if words and words[0].isdigit() else None


def _split_command_line(data: bytes) -> tuple[str, ...]:
    """``/proc/PID/cmdline`` as psutil splits it: text as its text-mode read decodes it
    (the file system's encoding, newlines made ``\\n``), words between NULs, or between
    spaces where a process rewrote its title with them."""
    text = data.decode(_FS_ENCODING, _FS_ERRORS).replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        return ()
    separator = "\x00" if text.endswith("\x00") else " "
    if text.endswith(separator):
        text = text[:-1]
    words = text.split(separator)
    if separator == "\x00" and len(words) == 1 and " " in text:
        words = text.split(" ")
    return tuple(words)
