"""A job's process group: who is still in it, and ending all of it.

A job leads its own process group, so everything it starts (DataLoader workers, ``torchrun``
ranks, a shell pipeline's stages) can be signalled at once with ``killpg``
(``process_control.signal_group``: every signal gputop sends goes out from there). The leader may
exit while its children live on, so "ended" means no live member is left, not that the
leader is gone. Zombies (ended, not yet reaped by a parent that may never come) count as
ended.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import psutil

from gputop.core.process_control import group_exists, signal_group

STOP_POLL_S = 0.1
AFTER_KILL_WAIT_S = 5.0


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    if not group_exists(pgid):
        return []
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid:
                continue
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                continue
        except (OSError, psutil.Error):
            continue
        members.append(pid)
    return members


def end_group(
    pgid: int,
    grace_s: float,
    wait: Callable[[float], None] = time.sleep,
    tick: Callable[[], object] | None = None,
) -> int | None:
    """SIGTERM to the group, SIGKILL to what is left after ``grace_s``.

    ``wait(seconds)`` waits between checks (the supervisor relays output meanwhile);
    ``tick()`` runs at each check (to reap a leader that is the caller's child).
    Returns the last signal sent, or ``None`` when the group was already empty.
    """
    if not group_members(pgid):
        return None
    signal_group(pgid, signal.SIGTERM)
    if wait_for_group(pgid, grace_s, wait, tick):
        return signal.SIGTERM
    signal_group(pgid, signal.SIGKILL)
    wait_for_group(pgid, AFTER_KILL_WAIT_S, wait, tick)
    return signal.SIGKILL


def wait_for_group(
    pgid: int,
    timeout_s: float,
    wait: Callable[[float], None] = time.sleep,
    tick: Callable[[], object] | None = None,
) -> bool:
    """Wait until the group is empty; False if members are left after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if tick is not None:
            tick()
        if not group_members(pgid):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        wait(min(STOP_POLL_S, left))


def process_alive(pid: int, start_time: float | None) -> bool:
    """The process exists, is not a zombie, and (when known) started when recorded."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True
    return start_time is None or abs(created - start_time) <= 1.0


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
