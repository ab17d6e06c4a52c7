"""The remote end: sample this host's GPUs and jobs and stream them until stdin closes.

``gputop agent`` runs on a GPU server under ``ssh``; its stdin is the SSH channel. When the
dashboard goes away (quits, crashes, loses the network), sshd closes that stdin and the
agent exits within a fraction of a second, so no agent outlives the connection that
started it. Lines follow gputop/core/remote/protocol.py; docs/lab.md describes the whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pwd
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii
from typing import IO, TYPE_CHECKING, Any

from gputop import __version__
from gputop.core.errors import GputopError
from gputop.core.model import GpuProcess, Snapshot
from gputop.core.redact import (
    ELLIPSIS,
    bounded_argv,
    cut_command,
    first_args,
    is_short,
    redact_argv,
)
from gputop.core.remote.agent_history import HistoryRequests
from gputop.core.remote.agent_history import answer as answer_history
from gputop.core.remote.host_jobs import MAX_HOST_JOBS
from gputop.core.remote.host_link import FLOOD_BYTES, FLOOD_WINDOW_S
from gputop.core.remote.protocol import PROTOCOL_VERSION, encode
from gputop.core.sampling.nvml_backend import NvmlBackend
from gputop.core.snapshot_json import snapshot_to_json
from gputop.core.users import current_user

if TYPE_CHECKING:
    from gputop.core.jobs.model import Job

JobsReader = Callable[[], tuple[list[dict[str, Any]] | None, str | None]]


def jobs_sent(jobs: Sequence[Job], limit: int = MAX_HOST_JOBS) -> list[Job]:
    """What the agent sends of ``jobs`` (oldest first, as the store lists them): every active
    one and the newest ended ones, ``limit`` in all (the newest active ones first, should
    there be more), still oldest first. The store keeps every job: a host with a long
    history sent thousands, each time one changed."""
    if len(jobs) <= limit:
        return list(jobs)
    active = [job for job in jobs if job.is_active][-limit:]
    room = limit - len(active)
    ended = [job for job in jobs if not job.is_active][-room:] if room else []
    kept = {job.id for job in (*active, *ended)}
    return [job for job in jobs if job.id in kept]


def read_jobs_from_store() -> JobsReader:
    """A reader of this host's gputop jobs (``jobs_sent``) that reports, not raises, an
    unreadable store."""
    store: Any = None

    def read() -> tuple[list[dict[str, Any]] | None, str | None]:
        nonlocal store
        try:
            if store is None:
                from gputop.core.jobs.store import JobStore

                store = JobStore.open()
            return [job.to_json() for job in jobs_sent(store.list_jobs())], None
        except (GputopError, OSError, sqlite3.Error) as error:
            if store is not None:  # the next read opens the store again
                with contextlib.suppress(GputopError, OSError, sqlite3.Error):
                    store.close()
            store = None
            return None, f"cannot read gputop's jobs: {error}"

    return read


def run_agent(
    backend: NvmlBackend,
    interval_s: float,
    out: IO[str],
    stop: threading.Event,
    read_jobs: JobsReader,
    requests: HistoryRequests | None = None,
) -> None:
    """Write hello, then a snapshot (and the jobs, when they changed) every ``interval_s``
    until ``stop`` is set or the reader is gone (a broken pipe)."""
    hello = {
        "protocol": PROTOCOL_VERSION,
        "mode": "full",
        "gputop": __version__,
        "user": current_user(),
        "interval_s": interval_s,
    }
    last_jobs: str | None = None
    reader = own_user_name()
    budget = command_budget(interval_s)
    pace = SendPace(time.monotonic())
    try:
        out.write(encode("hello", **hello))
        out.flush()
        while not stop.is_set():
            started = time.monotonic()
            snapshot = backend.sample()
            if pace.may_send(started):  # else this one is left out: the next is sent
                shown = for_reader(snapshot, reader, budget)
                line = encode("snapshot", snapshot=snapshot_to_json(shown))
                out.write(line)
                pace.sent(len(line))
            for request in requests.pending() if requests is not None else ():
                line = answer_history(request, snapshot.timestamp, reader=reader)
                out.write(line)
                pace.sent(len(line))
            jobs, error = read_jobs()
            jobs_line = encode("jobs", jobs=jobs, error=error)
            if jobs_line != last_jobs:  # jobs change rarely: spare the wire
                out.write(jobs_line)
                pace.sent(len(jobs_line))
                last_jobs = jobs_line
            out.flush()
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
    except BrokenPipeError:
        return


def own_user_name() -> str:
    """The name of the user the agent runs as, by its uid (not LOGNAME, which the caller
    sets): the one whose processes it sends whole."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def shows_whole(user: str | None, reader: str) -> bool:
    """Whether a command line of ``user``'s goes whole to the agent's ``reader``: only the
    reader's own, and never from an agent run as root (it runs for someone else)."""
    return user is not None and user == reader and reader != "root"


MAX_REDACTED = 1024
_REDACTED: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Command lines already redacted: a process keeps its own from sample to sample."""


def sent_command(command: tuple[str, ...], whole: bool) -> tuple[str, ...]:
    """``command`` as the agent sends it: redacted unless ``whole``, and at most
    ``MAX_COMMAND_CHARS`` in all (gputop/core/redact.py): two processes of 2 MB
    command lines, sent whole every second, made the lab drop the host as a flood."""
    if whole:
        return bounded_argv(command)
    shown = command if is_short(command) else first_args(command)  # the key: never megabytes
    redacted = _REDACTED.get(shown)
    if redacted is None:
        if len(_REDACTED) >= MAX_REDACTED:
            _REDACTED.clear()
        redacted = _REDACTED[shown] = cut_command(redact_argv(shown))
    return redacted


def for_reader(snapshot: Snapshot, reader: str, command_bytes: int | None = None) -> Snapshot:
    """``snapshot`` with the command line of every process not the reader's own redacted
    (gputop/core/redact.py; docs/security.md), and every command cut to a bound; all its
    commands together to ``command_bytes`` on the wire, where given (``command_budget``)."""
    listed = [
        [
            sent_command(p.command, shows_whole(p.user, reader)) if p.command else p.command
            for p in gpu.processes
        ]
        for gpu in snapshot.gpus
    ]
    if command_bytes is not None:
        listed = within_budget(listed, command_bytes)

    def shown(process: GpuProcess, command: tuple[str, ...]) -> GpuProcess:
        return (
            process if command is process.command else dataclasses.replace(process, command=command)
        )

    gpus = tuple(
        dataclasses.replace(gpu, processes=tuple(map(shown, gpu.processes, commands)))
        if gpu.processes
        else gpu
        for gpu, commands in zip(snapshot.gpus, listed, strict=True)
    )
    return dataclasses.replace(snapshot, gpus=gpus)


# The agent's pace: never a flood -----------------------------------------------------
# The commands' budget (below) kept long commands from a flood, but the rest of a process's
# record is about 600 bytes on the wire: a host with 2,000 GPU processes (a process on every
# card is listed on each) sent 1.2 MB a snapshot, 60 MB in 10 s at 0.2 s, and the lab dropped
# an honest host as a flood. The agent keeps itself to half the lab's bound instead: what it
# writes is counted in a bucket of FLOOD_BYTES / 4, refilled at that over FLOOD_WINDOW_S, so
# any window of the lab's (aligned with the agent's or not) holds at most twice that; a
# snapshot that finds the bucket empty is left out (the next is sent, whole, with its numbers
# as they are then), so a large host is sent less often, never cut or dropped.

PACE_BYTES = FLOOD_BYTES // 4
"""What the agent may write at once, and again over each ``FLOOD_WINDOW_S``."""


class SendPace:
    """The agent's bucket of bytes (above). A line may take it below nothing (one snapshot
    larger than the bucket is still sent, then nothing until it is paid back)."""

    def __init__(self, now: float) -> None:
        self._left = float(PACE_BYTES)
        self._at = now

    def may_send(self, now: float) -> bool:
        """Whether a snapshot may be written at ``now`` (monotonic seconds)."""
        elapsed = max(0.0, now - self._at)  # a monotonic clock; never a step back
        self._at = max(self._at, now)
        self._left = min(float(PACE_BYTES), self._left + elapsed * PACE_BYTES / FLOOD_WINDOW_S)
        return self._left > 0

    def sent(self, size: int) -> None:
        """``size`` characters written (ASCII: the protocol's lines are, so bytes)."""
        self._left -= size


# A snapshot's commands: a budget -----------------------------------------------------
# Each command is cut to MAX_COMMAND_CHARS, but 150 processes of 4 KB commands, sent every
# 0.2 s, were 37 MB in 10 s: the lab dropped the host as a flood (host_link.FLOOD_BYTES).
# All the commands of one snapshot share a budget of bytes on the wire, a quarter of what
# the lab takes a snapshot at the agent's interval; past it the longest are cut further
# (each keeps its start, and ends in an ellipsis), the short ones kept whole; no process is
# dropped and its numbers stay (docs/lab.md "What the lab reads").

FASTEST_INTERVAL_S = 0.2
"""``gputop agent --interval``'s smallest (cli/agent_command.py's ``MIN_INTERVAL_S``)."""
COMMANDS_SHARE = 4
"""The commands of a snapshot take at most 1/this of what the lab takes of one."""
MIN_COMMAND_BYTES = 32
"""What a command keeps at least, however many processes share the budget."""
_LIST_BYTES = 2
"""``[]`` around a command's arguments; each argument after the first adds a comma."""


def command_budget(interval_s: float) -> int:
    """Bytes of command text one snapshot may hold at ``interval_s``: a ``COMMANDS_SHARE``
    of the lab's flood bound spread over the snapshots of one of its windows (one more, for
    a window that starts just before a snapshot)."""
    fastest = interval_s if interval_s >= FASTEST_INTERVAL_S else FASTEST_INTERVAL_S  # NaN
    snapshots = math.ceil(FLOOD_WINDOW_S / fastest) + 1
    return FLOOD_BYTES // snapshots // COMMANDS_SHARE


def wire_bytes(command: tuple[str, ...]) -> int:
    """The bytes ``command`` takes in a protocol line (JSON, ASCII escapes: an emoji is 12)."""
    if not command:
        return _LIST_BYTES
    return sum(map(len, map(encode_basestring_ascii, command))) + len(command) - 1 + _LIST_BYTES


def within_budget(listed: list[list[tuple[str, ...]]], budget: int) -> list[list[tuple[str, ...]]]:
    """``listed`` (each card's processes' commands) with their wire bytes at most
    ``budget`` in all (``MIN_COMMAND_BYTES`` a command at least): every command longer than
    a share, the same for all, is cut to it; the others are kept whole."""
    flat = [command for commands in listed for command in commands if command]
    upper = sum(12 * sum(map(len, c)) + 3 * len(c) + _LIST_BYTES for c in flat)  # quoted
    if upper <= budget:  # every ordinary host: no command is measured
        return listed
    # The share is at most what it is by each command's least size (a byte a character):
    # a command of at least that is cut unmeasured (4,096 commands of 4,000 emoji, each
    # measured, took 0.3 s a snapshot); only the shorter ones are measured.
    least = [_least_bytes(command) for command in flat]
    most = _share(sorted(least), budget) or budget
    sizes: dict[int, int] = {}  # by the command's id: a process on 8 cards is listed 8 times
    for command, low in zip(flat, least, strict=True):
        if id(command) not in sizes:
            sizes[id(command)] = wire_bytes(command) if low < most else budget + 1
    cap = _share(sorted(sizes[id(command)] for command in flat), budget)
    if cap is None:
        return listed
    return [
        [_cut_measured(c, cap) if c and sizes[id(c)] > cap else c for c in commands]
        for commands in listed
    ]


def _least_bytes(command: tuple[str, ...]) -> int:
    """The fewest bytes ``command`` can take on the wire: each character one, quoted."""
    return sum(map(len, command)) + 3 * len(command) - 1 + _LIST_BYTES


def _share(sizes: list[int], budget: int) -> int | None:
    """The largest size ``cap`` with ``sum(min(size, cap)) <= budget`` (``sizes`` sorted),
    at least ``MIN_COMMAND_BYTES``; ``None`` where all fit as they are."""
    if sum(sizes) <= budget:
        return None
    left, remaining = budget, len(sizes)
    for size in sizes:
        cap = left // remaining
        if size > cap:
            return max(cap, MIN_COMMAND_BYTES)
        left -= size
        remaining -= 1
    return None


def cut_to_bytes(command: tuple[str, ...], limit: int) -> tuple[str, ...]:
    """``command``'s start that takes at most ``limit`` bytes on the wire, its last argument
    ending in an ellipsis; itself where it fits."""
    if _least_bytes(command) <= limit and wire_bytes(command) <= limit:
        return command
    return _cut_measured(command, limit)


def _cut_measured(command: tuple[str, ...], limit: int) -> tuple[str, ...]:
    """``cut_to_bytes`` of a command known to take more than ``limit``."""
    room = limit - _LIST_BYTES
    kept: list[str] = []
    for arg in command:
        comma = 1 if kept else 0
        reserve = comma + _ELLIPSIS_BYTES + 1  # what must stay for an ellipsis after it
        if len(arg) + 2 + reserve <= room:  # it may fit: measured
            cost = len(encode_basestring_ascii(arg)) + comma
            if cost + _ELLIPSIS_BYTES + 1 <= room:
                kept.append(arg)
                room -= cost
                continue
        room -= comma
        if kept and room < _ELLIPSIS_BYTES + 2:  # no room for this one: the last one ends it
            room += comma + len(encode_basestring_ascii(kept[-1]))
            arg = kept.pop()
        kept.append(_prefix_within(arg, room))
        break
    return tuple(kept)


_ELLIPSIS_BYTES = len(encode_basestring_ascii(ELLIPSIS)) - 2


def _prefix_within(arg: str, room: int) -> str:
    """The longest start of ``arg`` that, with an ellipsis, is at most ``room`` bytes
    quoted (an ellipsis alone where none fits)."""
    low, high = 0, min(len(arg), max(0, room))
    while low < high:  # ASCII escapes grow with the prefix: the first that fits is found
        middle = (low + high + 1) // 2
        if len(encode_basestring_ascii(arg[:middle])) + _ELLIPSIS_BYTES <= room:
            low = middle
        else:
            high = middle - 1
    return arg[:low] + ELLIPSIS


def report_fatal(out: IO[str], message: str) -> None:
    """The one line a failing agent sends, so the dashboard can show why."""
    try:
        out.write(encode("error", message=message))
        out.flush()
    except OSError:
        pass


def main_loop(open_backend: Callable[[], NvmlBackend], interval_s: float) -> int:
    """``gputop agent``: wires stdin, stdout and a backend together; returns the exit code."""
    requests = HistoryRequests(sys.stdin.buffer)
    stop = requests.closed
    try:
        backend = open_backend()
    except GputopError as error:
        report_fatal(sys.stdout, str(error))
        return error.exit_code
    try:
        run_agent(backend, interval_s, sys.stdout, stop, read_jobs_from_store(), requests)
    finally:
        backend.close()
        with contextlib.suppress(OSError):
            sys.stdout.flush()
    return 0
