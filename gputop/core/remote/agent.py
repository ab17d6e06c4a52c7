"""The remote end: sample this host's GPUs and jobs and stream them until stdin closes.

``gputop agent`` runs on a GPU server under ``ssh``; its stdin is the SSH channel. When the
dashboard goes away (quits, crashes, loses the network), sshd closes that stdin and the
agent exits within a fraction of a second, so no agent outlives the connection that
started it. Lines follow gputop/core/remote/protocol.py; docs/lab.md describes the whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from gputop import __version__
from gputop.core.errors import GputopError
from gputop.core.model import GpuProcess, Snapshot
from gputop.core.redact import bounded_argv, cut_command, first_args, is_short, redact_argv
from gputop.core.remote.agent_history import HistoryRequests
from gputop.core.remote.agent_history import answer as answer_history
from gputop.core.remote.host_jobs import MAX_HOST_JOBS
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
    try:
        out.write(encode("hello", **hello))
        out.flush()
        while not stop.is_set():
            started = time.monotonic()
            snapshot = backend.sample()
            shown = for_reader(snapshot, reader)
            out.write(encode("snapshot", snapshot=snapshot_to_json(shown)))
            for request in requests.pending() if requests is not None else ():
                out.write(answer_history(request, snapshot.timestamp, reader=reader))
            jobs, error = read_jobs()
            jobs_line = encode("jobs", jobs=jobs, error=error)
            if jobs_line != last_jobs:  # jobs change rarely: spare the wire
                out.write(jobs_line)
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


def for_reader(snapshot: Snapshot, reader: str) -> Snapshot:
    """``snapshot`` with the command line of every process not the reader's own redacted
    (gputop/core/redact.py; docs/security.md), and every command cut to a bound."""

    def shown(process: GpuProcess) -> GpuProcess:
        if not process.command:
            return process
        command = sent_command(process.command, shows_whole(process.user, reader))
        return (
            process if command is process.command else dataclasses.replace(process, command=command)
        )

    gpus = tuple(
        dataclasses.replace(gpu, processes=tuple(shown(p) for p in gpu.processes))
        if gpu.processes
        else gpu
        for gpu in snapshot.gpus
    )
    return dataclasses.replace(snapshot, gpus=gpus)


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
