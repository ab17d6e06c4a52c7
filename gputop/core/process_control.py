"""Signal a process only when it is provably the one that was recorded or shown.

Between the moment gputop learns of a process and the moment it signals, the process may
have ended and its pid been reused, or the machine restarted. A signal is therefore sent only
when everything recorded still holds: the same boot (``boot_id``), the same start (its start
in clock ticks since boot, field 22 of ``/proc/PID/stat``, which no clock step moves; for
older records the start time to a second), the same session id where recorded, and the
current user's own process. The pid is pinned with ``pidfd_open`` before the checks and
signalled through that descriptor, so it cannot be reused in between; when identity cannot
be proven nothing is sent and the message says why (docs/security.md, part two).

This is the one module that sends signals (``pidfd_send_signal``, ``kill``, ``killpg``).
A job leads its own process group, signalled at once with ``killpg`` (``signal_group``);
"ended" means no live member is left (zombies count as ended), not that the leader is gone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable, Iterator

import psutil

from gputop.core.errors import GputopError
from gputop.core.records import frozen

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
START_TIME_TOLERANCE_S = 1.0
STOP_POLL_S = 0.1
AFTER_KILL_WAIT_S = 5.0


class SignalRefused(GputopError):
    """The process may not or cannot be signalled; the message says why."""


class ProcessGone(SignalRefused):
    """The recorded process has ended (or belongs to an earlier boot): nothing to signal."""


class IdentityUnproven(SignalRefused):
    """A process with that pid exists but cannot be proven to be the recorded one."""


@frozen(slots=False)
class Recorded:
    """What was recorded about a process when it was started or shown."""

    pid: int
    start_time: float | None
    session_id: int | None = None
    boot_id: str | None = None
    start_ticks: int | None = None
    """Its start in clock ticks since boot (``start_ticks``): with ``boot_id``, what proves
    its identity whatever the wall clock did since."""


@frozen(slots=False)
class Started:
    """When a process started: as a time (for people, and for records without ticks) and
    in clock ticks since this boot (for identity)."""

    time: float | None
    ticks: int | None


_PROC = "/proc"


def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``: when the process started, in clock ticks since boot.
    The kernel counts it on a clock no one can set; ``None`` where it cannot be read."""
    try:
        ticks = int(_stat_fields(pid)[19])
    except (OSError, ValueError, IndexError):
        return None
    return boot_ticks(ticks)


def _stat_fields(pid: int) -> list[bytes]:
    """``/proc/PID/stat`` from field 3 (the state) on; raises ``OSError``, ``ValueError``."""
    with open(f"{_PROC}/{pid}/stat", "rb") as handle:
        line = handle.read()
    # The command name (field 2) is in parentheses and may hold spaces and parentheses.
    return line[line.rindex(b")") + 2 :].split()


def boot_ticks(seen: int) -> int | None:
    """A start in ticks as this process reads it (field 22), counted from this boot's start
    wherever it is read. In a time namespace whose boot time is moved (``unshare -T
    --boottime``: some containers, a restored checkpoint) the kernel adds the namespace's
    offset to every field 22 it shows (and takes it from ``btime``, so start times agree);
    read there, every process would look like another. ``None`` where the offset is not a
    whole number of ticks (then the start time is compared instead)."""
    offset = _boottime_offset_ticks()
    if offset is None:
        return None
    ticks = seen - offset
    return ticks if ticks >= 0 else None


@functools.cache
def _boottime_offset_ticks() -> int | None:
    """This process's time namespace's boot time offset in ticks (0 outside one, or on a
    kernel without time namespaces); ``None`` where it is no whole number of ticks."""
    try:
        with open(f"{_PROC}/self/timens_offsets", encoding="ascii") as handle:
            lines = handle.read().splitlines()
        hertz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return 0
    for line in lines:
        words = line.split()
        if len(words) != 3 or words[0] not in ("boottime", "7"):  # 7: CLOCK_BOOTTIME
            continue
        try:
            seconds, nanoseconds = int(words[1]), int(words[2])
        except ValueError:
            return None
        if hertz <= 0 or 1_000_000_000 % hertz or nanoseconds % (1_000_000_000 // hertz):
            return None
        per_tick = 1_000_000_000 // hertz
        return seconds * hertz + nanoseconds // per_tick
    return 0


def process_start(pid: int) -> Started:
    """When ``pid`` started, both ways (``None`` parts where it cannot be read)."""
    return Started(process_start_time(pid), start_ticks(pid))


def same_boot(boot_id: str | None) -> bool:
    """``boot_id`` is this boot's (both known): its ticks count from this boot's start."""
    return boot_id is not None and boot_id == current_boot_id()


def current_boot_id() -> str | None:
    """This boot's id (a new random UUID at every boot), or None where Linux has none."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def from_earlier_boot(boot_id: str | None, start_time: float | None) -> bool:
    """Recorded before this machine last started: its pids now name other processes."""
    if boot_id is not None:
        now = current_boot_id()
        return now is not None and now != boot_id
    if start_time is None:
        return False
    try:
        return start_time < psutil.boot_time() - START_TIME_TOLERANCE_S
    except (psutil.Error, OSError):
        return False


@contextlib.contextmanager
def pinned(recorded: Recorded, what: str = "Process") -> Iterator[int | None]:
    """Prove ``recorded`` names the same live process of ours; yields a pidfd (None where
    the kernel has no pidfd_open) through which it can be signalled without a race.

    Raises ProcessGone or IdentityUnproven with a message for a person.
    """
    pid = recorded.pid
    label = f"{what} {pid}"
    if from_earlier_boot(recorded.boot_id, recorded.start_time):
        raise ProcessGone(
            f"{label} was started before this machine restarted: it cannot still be running, "
            "and its pid now belongs to another process; nothing sent."
        )
    if recorded.start_time is None and (recorded.start_ticks is None or recorded.boot_id is None):
        raise IdentityUnproven(
            f"{label}: its start time was never recorded, so gputop cannot prove the pid "
            "still names it; nothing sent."
        )
    pidfd = _pidfd_open(pid, label)
    try:
        _prove(recorded, label)
        yield pidfd
    finally:
        if pidfd is not None:
            os.close(pidfd)


def send(pidfd: int | None, pid: int, signum: int) -> bool:
    """Signal a pinned process; False when it has ended meanwhile."""
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        raise SignalRefused(f"No permission to signal process {pid}.") from None
    return True


def _pidfd_open(pid: int, label: str) -> int | None:
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise ProcessGone(f"{label} has already ended.") from None
    except OSError:  # ENOSYS on an old kernel: the checks below still run
        return None


def _prove(recorded: Recorded, label: str) -> None:
    try:
        process = psutil.Process(recorded.pid)
        uids = process.uids()
        created = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
        ticks = start_ticks(recorded.pid) if recorded.start_ticks is not None else None
    except psutil.NoSuchProcess:
        raise ProcessGone(f"{label} has already ended.") from None
    except psutil.AccessDenied:
        raise IdentityUnproven(
            f"{label} belongs to another user; gputop will not signal it."
        ) from None
    if not _same_start(recorded, created, ticks):
        raise ProcessGone(
            f"{label} has ended and its pid now belongs to another process; nothing sent."
        )
    if zombie:
        raise ProcessGone(f"{label} has already ended.")
    if uids.real != os.getuid():
        raise IdentityUnproven(f"{label} belongs to another user; gputop will not signal it.")
    if recorded.session_id is not None:
        try:
            session = os.getsid(recorded.pid)
        except ProcessLookupError:
            raise ProcessGone(f"{label} has already ended.") from None
        except OSError as error:
            raise IdentityUnproven(
                f"{label}: its session cannot be read ({error.strerror}); nothing sent."
            ) from None
        if session != recorded.session_id:
            raise IdentityUnproven(
                f"{label} is in session {session}, not in session {recorded.session_id} "
                "that gputop recorded: it is not the same process; nothing sent."
            )


def _same_start(recorded: Recorded, created: float, ticks: int | None) -> bool:
    """The process now started when ``recorded`` says: by its ticks where both are known in
    the same boot (a clock step moves ``created``, never the ticks), else by its time."""
    if recorded.start_ticks is not None and ticks is not None and same_boot(recorded.boot_id):
        return ticks == recorded.start_ticks
    if recorded.start_time is None:  # only ticks recorded, and they cannot be compared
        return False
    return abs(created - recorded.start_time) <= START_TIME_TOLERANCE_S


def signal_own_process(
    pid: int,
    start_time: float | None,
    signum: signal.Signals,
    *,
    session_id: int | None = None,
    boot_id: str | None = None,
    start_ticks: int | None = None,
) -> None:
    """Send ``signum`` to ``pid`` if it is provably still the same process and ours."""
    recorded = Recorded(pid, start_time, session_id, boot_id, start_ticks)
    with pinned(recorded) as pidfd:
        if not send(pidfd, pid, signum):
            raise ProcessGone(f"Process {pid} has already ended.")


def group_exists(pgid: int) -> bool:
    """Process group ``pgid`` has a member (signal 0: asks, sends nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # members exist; they may not all be ours (the caller checks)
    return True


def pid_exists(pid: int) -> bool:
    """``pid`` may be a live process or thread (signal 0: asks, sends nothing): psutil's
    ``pid_exists`` without its read of ``/proc/PID/status``, for callers that read that
    file anyway and turn a thread's id away there (``sampling/host_processes.py``)."""
    if pid <= 0:  # kill() would ask about a process group, or every process
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OverflowError, OSError):  # ESRCH, or no pid at all
        return False
    return True


def signal_group(pgid: int, signum: int) -> bool:
    """``killpg`` to a job's whole process group; False when it has no member left.

    Only a job's supervisor calls this, for the group its own unreaped child leads: an
    unreaped leader keeps its pid, the group's id, from being reused, so the signal can
    only reach the job's own group (docs/security.md, part two).
    """
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def in_a_shell_job() -> bool:
    """Whether this process group is a shell's job: the first ancestor outside it is in
    this session (the shell; POSIX: the group is not orphaned). A group whose ancestors
    are all in it or in other sessions (a session of its own: ``ssh -t host gputop``, a
    process manager) would stay stopped for ever."""
    group, session, pid = os.getpgrp(), os.getsid(0), os.getpid()
    try:
        while pid > 1:
            pid = int(_stat_fields(pid)[1])  # the parent (state, ppid, pgrp, session)
            if pid <= 1 or os.getpgid(pid) != group:
                return pid > 1 and os.getsid(pid) == session
    except (OSError, ValueError, IndexError):
        pass
    return False


def stop_own_job() -> None:
    """SIGTSTP to this process's own group (its shell job), as the terminal's ctrl+z sends
    it: the group this process is in cannot be anyone else's."""
    os.killpg(os.getpgrp(), signal.SIGTSTP)


# --- a job's process group ------------------------------------------------------------


def live_processes_where(of: Callable[[int], int], wanted: int) -> list[int]:
    """The live (not zombie) processes whose ``of(pid)`` (``os.getpgid``, ``os.getsid``)
    is ``wanted``; one that ends meanwhile is left out."""
    found = []
    for pid in psutil.pids():
        try:
            if of(pid) != wanted:
                continue
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                continue
        except (OSError, psutil.Error):
            continue
        found.append(pid)
    return found


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    if not group_exists(pgid):
        return []
    return live_processes_where(os.getpgid, pgid)


def end_group(pgid: int, grace_s: float, wait: Callable[[float], None]) -> int | None:
    """SIGTERM to the group, SIGKILL to what is left after ``grace_s``.

    ``wait(seconds)`` waits between checks (the supervisor relays output meanwhile).
    Returns the last signal sent, or ``None`` when the group was already empty.
    """
    if not group_members(pgid):
        return None
    signal_group(pgid, signal.SIGTERM)
    if wait_for_group(pgid, grace_s, wait):
        return signal.SIGTERM
    signal_group(pgid, signal.SIGKILL)
    wait_for_group(pgid, AFTER_KILL_WAIT_S, wait)
    return signal.SIGKILL


def wait_for_group(pgid: int, timeout_s: float, wait: Callable[[float], None]) -> bool:
    """Wait until the group is empty; False if members are left after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not group_members(pgid):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        wait(min(STOP_POLL_S, left))


def process_alive(
    pid: int,
    start_time: float | None,
    start_ticks_recorded: int | None = None,
    boot_id: str | None = None,
) -> bool:
    """The process exists, is not a zombie, and (when known) started when recorded: by its
    ticks since boot where they and ``boot_id`` were recorded (a clock step cannot move
    them), else by its start time to a second."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True
    if start_time is None:
        return True
    ticks = start_ticks(pid) if start_ticks_recorded is not None else None
    recorded = Recorded(pid, start_time, boot_id=boot_id, start_ticks=start_ticks_recorded)
    return _same_start(recorded, created, ticks)


def session_of(pid: int) -> int | None:
    """The session id of ``pid``, or None when it has ended (or cannot be asked)."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


def process_start_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None
