"""One long-lived ssh connection to one host, read by one thread, reconnected with backoff.

A thread per host, not a selector loop: a blocking read of ssh's stdout costs nothing while
it waits, and each host's reconnect timing stays independent (docs/lab.md).

State: connecting → live (a snapshot arrived) → stale (none for ``stale_after_s``) or
unreachable (ssh ended: the classified reason, and when the next try is). After a connection
that delivered data and held for ``STEADY_AFTER_S``, the next try is at once; after any
other (failed, hung up sooner, unreadable, or a ``flood`` past ``FLOOD_BYTES`` or
``FLOOD_LINES`` within ``FLOOD_WINDOW_S``) the wait doubles from ``first_retry_s`` up to
``max_retry_s``.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import IO

from gputop.core.remote.agent_history import HistoryAnswer, HistoryAnswers
from gputop.core.remote.host_feed import HostFeed
from gputop.core.remote.protocol import encode
from gputop.core.remote.remote_command import remote_agent_command
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import Failure, classify_failure, ssh_argv

STDERR_TAIL_LINES = 20
STDERR_LINE_BYTES = 4096
MAX_LINE_BYTES = 16 * 1024 * 1024
"""A line longer than this is dropped unread (a snapshot of 8 busy H100s is ~64 KB)."""
STEADY_AFTER_S = 10.0
"""A connection that delivered and held this long resets the backoff (the next try is at once)."""
FLOOD_WINDOW_S = 10.0
FLOOD_BYTES = 32 * 1024 * 1024
FLOOD_LINES = 20_000
"""More bytes or lines than these within ``FLOOD_WINDOW_S`` is no agent (one sends two or
three lines an interval, ~64 KB for 8 busy cards; reduced mode a line per card and process):
the connection is dropped as a flood. Reading them cost most of a core (a host writing
unreadable lines at 48 MB/s: 16 s of CPU in 20 s)."""


class HostLink:
    """Keeps one host's status current until :meth:`stop`."""

    def __init__(
        self,
        host: str,
        interval_s: float = 1.0,
        *,
        environ: Mapping[str, str] | None = None,
        first_retry_s: float = 1.0,
        max_retry_s: float = 30.0,
        stale_after_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.interval_s = interval_s
        self.stale_after_s = (
            stale_after_s if stale_after_s is not None else max(3 * interval_s, 3.0)
        )
        self._argv = ssh_argv(host, remote_agent_command(interval_s), environ)
        self._environ = environ
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._clock = clock
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._status = HostStatus(host, LinkState.CONNECTING)
        self._last_snapshot_at: float | None = None
        self._rate_start: tuple[float, int] | None = None
        self._retry_at: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._history = HistoryAnswers(self._changed)
        self._thread = threading.Thread(target=self._run, name=f"host-{host}", daemon=True)

    # --- what callers use -----------------------------------------------------------------

    def start(self) -> HostLink:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the connection (the remote agent exits when its stdin closes) and the thread."""
        self._stopping.set()
        with self._changed:
            process = self._process
        if process is not None:
            _end(process)
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def status(self) -> HostStatus:
        with self._changed:
            status = self._status
            now = self._clock()
            if (
                status.state is LinkState.LIVE
                and self._last_snapshot_at is not None
                and now - self._last_snapshot_at > self.stale_after_s
            ):
                status = replace(
                    status, state=LinkState.STALE, stale_for_s=now - self._last_snapshot_at
                )
            if status.state is LinkState.UNREACHABLE and self._retry_at is not None:
                status = replace(status, retry_in_s=max(0.0, self._retry_at - now))
            return status

    def wait_for(self, condition: Callable[[HostStatus], bool], timeout_s: float) -> bool:
        """Wait until ``condition(status)`` holds; False after ``timeout_s``. Woken by every
        change; re-checked every 0.2 s too, since staleness comes with time alone."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                if condition(self.status()):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.2))

    # --- the thread -----------------------------------------------------------------------

    def request_history(
        self,
        window_s: float,
        by: str = "user",
        physical_index: int | None = None,
        columns: int | None = None,
        uuid: str | None = None,
    ) -> int | None:
        """Ask the host's agent for its history report (docs/lab.md), and with ``columns``
        the card's readings in that many slices (of the card with ``uuid``, where known);
        the request's id, or ``None`` where no agent is connected (reduced mode, or not
        connected now)."""
        with self._changed:
            process = self._process
            if process is None or process.stdin is None or self._status.mode is not Mode.FULL:
                return None
            request_id = self._history.next_id()
            line = encode(
                "history_request",
                id=request_id,
                window_s=window_s,
                by=by,
                physical_index=physical_index,
                **({} if columns is None else {"columns": columns}),
                **({} if uuid is None else {"uuid": uuid}),
            )
            try:
                process.stdin.write(line.encode())
                process.stdin.flush()
            except (OSError, ValueError):  # the connection is ending
                return None
        return request_id

    def history_answer(self, request_id: int, timeout_s: float) -> HistoryAnswer | None:
        """The agent's answer to ``request_history``, waiting up to ``timeout_s``."""
        return self._history.wait(request_id, timeout_s)

    def _update(self, **changes: object) -> None:
        with self._changed:
            self._status = replace(self._status, **changes)  # type: ignore[arg-type]
            self._changed.notify_all()

    def _run(self) -> None:
        delay = self._first_retry_s
        while not self._stopping.is_set():
            self._update(state=LinkState.CONNECTING, failure=None)
            began = time.monotonic()
            delivered, failure = self._session()
            if self._stopping.is_set():
                break
            if delivered and time.monotonic() - began >= STEADY_AFTER_S:
                delay = self._first_retry_s
                wait = 0.0
            else:
                wait, delay = delay, min(delay * 2, self._max_retry_s)
            with self._changed:
                self._retry_at = self._clock() + wait
            self._update(state=LinkState.UNREACHABLE, failure=failure)
            self._stopping.wait(wait)
            with self._changed:
                self._retry_at = None

    def _session(self) -> tuple[bool, Failure]:
        """One ssh connection, read to its end: (did it deliver a snapshot, why it ended)."""
        try:
            process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # no controlling terminal: ssh can never prompt
                env=None if self._environ is None else dict(self._environ),
            )
        except OSError as error:
            return False, Failure("no-ssh", f"cannot run ssh ({error})", "install OpenSSH's client")
        with self._changed:
            self._process = process
        if self._stopping.is_set():
            _end(process)
        stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        stderr_reader = threading.Thread(
            target=collect_tail, args=(process.stderr, stderr_tail), daemon=True
        )
        stderr_reader.start()
        with self._changed:
            self._rate_start = None
        try:
            delivered, failure = self._read(process.stdout)
        except Exception as error:  # what the host sent broke its reader: its fault alone
            # (feed catches every decoding error; this keeps the link alive whatever comes)
            delivered, failure = False, _unreadable(error)
        if failure is None:  # end of output: ssh is exiting; its status says why
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5.0)
        _end(process)
        stderr_reader.join(2.0)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        with self._changed:
            self._process = None
        if failure is None:
            failure = classify_failure(self.host, "\n".join(stderr_tail), process.returncode)
            if delivered and failure.kind in ("closed", "remote-error"):
                failure = Failure("lost", f"connection lost ({failure.reason})")
        return delivered, failure

    def _read(self, stdout: IO[bytes] | None) -> tuple[bool, Failure | None]:
        delivered = False
        feed = HostFeed(self.host)
        assert stdout is not None
        flood = _FloodGauge()
        for size, raw in _lines(stdout):
            self._count(size)
            if flood.over(size):
                return False, flood.failure()
            # None: longer than any real snapshot, a broken or hostile server
            text = None if raw is None else raw.decode("utf-8", "replace")
            outcome = feed.too_long() if text is None else feed.feed(text)
            if outcome.end is not None:
                return delivered, outcome.end
            if outcome.snapshot_arrived:
                self._arrived(outcome.changes)
                delivered = True
            elif outcome.changes:
                self._update(**outcome.changes)
            if outcome.history is not None:
                self._history.arrived(outcome.history)
        return delivered, None

    def _count(self, size: int) -> None:
        with self._changed:
            self._status = replace(self._status, bytes_received=self._status.bytes_received + size)

    def _arrived(self, changes: dict[str, object]) -> None:
        now = self._clock()
        with self._changed:
            total = self._status.bytes_received
            rate = None
            if self._rate_start is None:
                self._rate_start = (now, total)
            elif now > self._rate_start[0]:
                rate = (total - self._rate_start[1]) / (now - self._rate_start[0])
            self._last_snapshot_at = now
            self._status = replace(
                self._status,
                state=LinkState.LIVE,
                failure=None,
                bytes_per_s=rate if rate is not None else self._status.bytes_per_s,
                snapshots_received=self._status.snapshots_received + 1,
                **changes,  # type: ignore[arg-type]
            )
            self._changed.notify_all()


class _FloodGauge:
    """Counts a connection's bytes and lines in windows of ``FLOOD_WINDOW_S``."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._bytes = 0
        self._lines = 0

    def over(self, size: int) -> bool:
        """Count one line (or piece of one) of ``size`` bytes; True past either bound."""
        now = time.monotonic()
        if now - self._start >= FLOOD_WINDOW_S:
            self._start, self._bytes, self._lines = now, 0, 0
        self._bytes += size
        self._lines += 1
        return self._bytes > FLOOD_BYTES or self._lines > FLOOD_LINES

    def failure(self) -> Failure:
        return Failure(
            "flood",
            f"sent {self._bytes / 2**20:.0f} MiB in {self._lines} lines within "
            f"{FLOOD_WINDOW_S:g} s, more than a gputop agent sends; gputop dropped the "
            "connection and reconnects with backoff",
        )


def _unreadable(error: Exception) -> Failure:
    """The failure said for a connection whose output broke its reader: retried with
    backoff (it delivered nothing), never a thread gone and a host "connecting" for ever."""
    return Failure(
        "unreadable",
        f"what the server sent could not be read ({type(error).__name__}); "
        "gputop reconnects with backoff",
    )


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(bytes read, line) for each line of the stream, never holding more than
    MAX_LINE_BYTES: each piece of a longer line comes as (its size, None)."""
    skipping = False
    while True:
        raw = stream.readline(MAX_LINE_BYTES)
        if not raw:
            return
        complete = raw.endswith(b"\n")
        if skipping or (not complete and len(raw) >= MAX_LINE_BYTES):
            skipping = not complete
            yield len(raw), None
        else:
            yield len(raw), raw


def collect_tail(stream: IO[bytes] | None, tail: deque[str]) -> None:
    """The last lines of ssh's stderr (the remote command's too), each cut to
    ``STDERR_LINE_BYTES``: a host writing stderr without an end of line was held whole (400 MB
    sent, 404 MiB kept). The rest of a longer line is read and dropped, so ssh never blocks."""
    tail.extend(cut_lines(stream, STDERR_LINE_BYTES, None))


def cut_lines(stream: IO[bytes] | None, limit: int, strip: str | None) -> Iterator[str]:
    """Each line of ``stream``, decoded, ``rstrip(strip)``ped and cut to ``limit`` bytes
    (``…`` where it was cut); the rest of a longer line is read and dropped."""
    if stream is None:
        return
    skipping = False
    while raw := stream.readline(limit):
        complete = raw.endswith(b"\n")
        if not skipping:
            text = raw.decode("utf-8", "replace").rstrip(strip)
            yield text if complete else text + "…"
        skipping = not complete


def _end(process: subprocess.Popen[bytes]) -> None:
    """Close ssh's stdin (the agent's), then make sure ssh itself is gone."""
    try:
        if process.stdin is not None:
            process.stdin.close()
    except OSError:
        pass
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(3.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
