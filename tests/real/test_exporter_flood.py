"""A local user floods ``gputop exporter``: it keeps answering scrapes (docs/exporter.md,
"Serving under a flood").

The exporter runs as a service runs it (1,024 descriptors, systemd's default soft limit);
this test, one process on loopback, holds 1,100 idle connections and 1,000 half-finished
requests against it, scrapes, then lets everything go at once (the half-finished requests
completed together) and scrapes again. Bounded in count and in time.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psutil
import pytest
from helpers.prometheus import _serving_url, http_get
from helpers.real_components import cannot
from helpers.waiting import wait_for

from gputop.core.exporter.http_server import HEAD_DEADLINE_S, connection_cap

SERVICE_DESCRIPTORS = 1024
IDLE = 1100
HALF_FINISHED = 1000
SCRAPE_DEADLINE_S = 5.0
HOLD_S = 2.0
"""How long the flood is held while scraping, for the exporter's CPU share."""
SCRAPE_EVERY_S = 0.1
"""Ten scrapes a second while held: far more than any Prometheus asks."""
MAX_THREADS = 6
"""The main thread (sampling), the loop, two page builders, and room for the runtime's own."""
MAX_CORE_SHARE = 0.5
BATCH, PACE_S = 50, 0.005
HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _service_limits() -> None:  # in the child, before exec: as systemd starts a service
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVICE_DESCRIPTORS, SERVICE_DESCRIPTORS))


@contextmanager
def _own_descriptors(needed: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        yield
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(hard, needed)))
    except (ValueError, OSError):
        cannot(f"needs {needed} descriptors in the test process (hard limit {hard})")
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, max(hard, needed)))


@contextmanager
def _service_exporter() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputop",
            "exporter",
            "--fake",
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "3600",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GPUTOP_FAKE_TIME": "30"},
        preexec_fn=_service_limits,
    )
    try:
        yield process, _serving_url(process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError("gputop exporter did not stop on SIGTERM") from None
    assert process.stderr is not None
    said = process.stderr.read()
    assert said == "", said  # nothing said about the flood (asyncio's errors, tracebacks)
    assert process.returncode == 0


class Flood:
    """Non-blocking sockets of this process at the exporter, held until ``release``."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.selector = selectors.DefaultSelector()  # epoll: past 1,024 descriptors
        self.idle: list[socket.socket] = []
        self.half: list[socket.socket] = []
        self._unsent: set[socket.socket] = set()

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(self.address)
        return sock

    def open(self, idle: int, half: int) -> None:
        """Every connection, BATCH at a time with a short pause between batches: all at
        once, most connects would wait in the kernel's full listen queue (retried after 1 s,
        3 s, ...), never reaching the exporter, and a scrape's connect with them."""
        for number in range(idle + half):
            sock = self._connect()
            if number < idle:
                self.idle.append(sock)
            else:
                self.half.append(sock)
                self._unsent.add(sock)
                self.selector.register(sock, selectors.EVENT_WRITE)
            if number % BATCH == BATCH - 1:
                self.hold(PACE_S)
        self.send_pending(timeout_s=10.0)

    def send_pending(self, timeout_s: float) -> None:
        """Writes the first part of each half-finished request once its connect is done
        (the listen queue holds some back for a while: no more than ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while self._unsent and time.monotonic() < deadline:
            self.hold(0.2)

    def hold(self, seconds: float) -> None:
        """Waits ``seconds`` at most (the pace of the connects and the scrapes), writing the
        first part of each half-finished request whose connect is done meanwhile."""
        for key, _ in self.selector.select(timeout=seconds):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            self.selector.unregister(sock)
            self._unsent.discard(sock)
            with suppress(OSError):  # shed already: the exporter closed it
                sock.send(HALF_REQUEST)

    def finish_every_request(self) -> None:
        """The rest of every half-finished request, all at once (those the exporter shed
        or timed out refuse it, or take it into a closed connection)."""
        for sock in self.half:
            with suppress(OSError):
                sock.send(b"1\r\n\r\n")

    def release(self) -> None:
        for sock in self.idle + self.half:
            sock.close()
        self.selector.close()


def _timed_scrape(url: str) -> float:
    started = time.monotonic()
    page = http_get(url, timeout_s=SCRAPE_DEADLINE_S)
    took = time.monotonic() - started
    assert "DCGM_FI_DEV_GPU_UTIL" in page
    return took


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def test_a_flood_of_idle_and_half_finished_connections_does_not_starve_scrapes() -> None:
    cap = connection_cap(SERVICE_DESCRIPTORS)
    with _own_descriptors(IDLE + HALF_FINISHED + 256), _service_exporter() as (process, url):
        exporter = psutil.Process(process.pid)
        parsed = urllib.parse.urlsplit(url)
        assert parsed.hostname is not None and parsed.port is not None
        _timed_scrape(url)
        descriptors_before = exporter.num_fds()
        flood = Flood((parsed.hostname, parsed.port))
        try:
            flood.open(IDLE, HALF_FINISHED)
            threads = [exporter.num_threads()]
            took = [_timed_scrape(url)]
            # Held: the exporter keeps at most its cap of them, the oldest shed
            wait_for(
                lambda: exporter.num_fds() <= descriptors_before + cap,
                "the exporter to shed connections past its cap",
            )
            cpu_before, held_since = _cpu_s(exporter), time.monotonic()
            threads.append(exporter.num_threads())
            while time.monotonic() - held_since < HOLD_S:
                took.append(_timed_scrape(url))
                threads.append(exporter.num_threads())
                flood.hold(SCRAPE_EVERY_S)
            share = (_cpu_s(exporter) - cpu_before) / (time.monotonic() - held_since)
            flood.finish_every_request()
            took.append(_timed_scrape(url))
        finally:
            flood.release()

        assert max(took) < SCRAPE_DEADLINE_S, took
        assert max(threads) <= MAX_THREADS, threads
        assert share < MAX_CORE_SHARE, f"the exporter used {share:.0%} of a core, held"
        # Everything let go: the exporter is back to what it held before, and answers
        wait_for(
            lambda: exporter.num_fds() <= descriptors_before + 2,
            "the exporter to close the flood's connections",
            timeout_s=HEAD_DEADLINE_S + 10,
        )
        assert exporter.num_threads() <= MAX_THREADS
        assert _timed_scrape(url) < SCRAPE_DEADLINE_S
        assert process.poll() is None


@pytest.mark.parametrize("limit", [256, 1024, 65536])
def test_the_connection_cap_stays_below_the_descriptor_limit(limit: int) -> None:
    cap = connection_cap(limit)
    assert 8 <= cap < limit // 2
