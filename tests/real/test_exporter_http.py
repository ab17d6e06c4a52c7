"""The exporter's HTTP server on its own (gputop/core/exporter/http_server.py): what it
refuses, the connections it sheds, the one build a burst of requests shares, TLS that a
stalled handshake cannot block. On loopback; docs/exporter.md, "Serving under a flood"."""

from __future__ import annotations

import concurrent.futures
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers.prometheus import http_get, running_exporter
from helpers.real_components import cannot
from helpers.waiting import wait_for

from gputop.core.exporter.http_server import (
    MAX_HEADERS,
    MAX_REQUEST_LINE,
    BoundedServer,
)

PAGE = b"# a page\nup 1\n"
CONCURRENT_SCRAPES = 200


class SlowApp:
    """A WSGI app whose page takes ``build_s`` to build, counting its builds."""

    def __init__(self, build_s: float = 0.0) -> None:
        self.build_s = build_s
        self.builds = 0
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with self._lock:
            self.builds += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.build_s)  # the page's cost, as a real build would take
        with self._lock:
            self.running -= 1
        if environ["REQUEST_METHOD"] != "GET":
            start_response("405 Method Not Allowed", [("Allow", "OPTIONS,GET")])
            return [b""]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [PAGE]


@contextmanager
def _server(app: SlowApp, **options: Any) -> Iterator[tuple[BoundedServer, int]]:
    server = BoundedServer(app, lambda: 1, "127.0.0.1", 0, **options)
    port = server.start()
    try:
        yield server, port
    finally:
        server.stop()


def _exchange(port: int, request: bytes, timeout_s: float = 10.0) -> bytes:
    """Sends ``request``, reads until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /metrics?" + b"a" * MAX_REQUEST_LINE + b" HTTP/1.1\r\n\r\n", b"414"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", b"414"),  # past the stream's limit
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", b"431"),
        (b"GET / HTTP/1.1\r\n" + b"X: 1\r\n" * (MAX_HEADERS + 1) + b"\r\n", b"431"),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"405"),
        (b"DELETE / HTTP/1.1\r\n\r\n", b"405"),
        (b"GET /\r\n\r\n", b"400"),
        (b"GET / HTTP/2.0\r\n\r\n", b"400"),
        (b"G\xffT / HTTP/1.1\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", b"400"),
    ],
)
def test_a_bad_request_is_refused_with_its_status_and_the_connection_closed(
    request_bytes: bytes, status: bytes
) -> None:
    with _server(SlowApp()) as (_, port):
        answer = _exchange(port, request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
    assert b"Connection: close" in answer


def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    with _server(SlowApp()) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        for _ in range(3):
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(PAGE):
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 OK")
            assert b"Connection: keep-alive" in answer


def test_a_burst_of_requests_released_at_once_builds_the_page_once() -> None:
    app = SlowApp(build_s=0.5)
    requests = 100
    with _server(app) as (server, port):
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(requests)]
        try:
            for sock in socks:  # every request but its last byte, then all at once
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r")
            for sock in socks:
                sock.sendall(b"\n")
            answers = []
            for sock in socks:
                sock.settimeout(30)
                answer = b""
                while not answer.endswith(PAGE):
                    answer += sock.recv(65536)
                answers.append(answer)
        finally:
            for sock in socks:
                sock.close()
        assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in answers)
        assert app.builds <= 2, app.builds  # one, or two when the burst straddles the end
        assert server.cache.builds == app.builds
        assert app.most_at_once == 1


def test_a_page_is_built_again_once_the_cache_has_expired() -> None:
    app = SlowApp()
    with _server(app) as (_, port):
        url = f"http://127.0.0.1:{port}/metrics"
        http_get(url)
        wait_for(lambda: http_get(url) and app.builds >= 2, "a second build", timeout_s=10)


def test_past_the_cap_the_longest_waiting_connection_is_shed() -> None:
    with _server(SlowApp(), max_connections=8) as (server, port):
        first = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        wait_for(lambda: len(server._open) == 8, "eight connections held")
        newest = socket.create_connection(("127.0.0.1", port))
        first[0].settimeout(10)
        assert first[0].recv(1) == b""  # the oldest: closed by the server
        newest.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        newest.settimeout(10)
        assert newest.recv(65536).startswith(b"HTTP/1.1 200 OK")
        assert server.shed >= 1
        for sock in [*first, newest]:
            sock.close()


def test_a_connection_being_answered_is_never_shed() -> None:
    app = SlowApp(build_s=1.0)
    with _server(app, max_connections=8) as (_, port):
        busy = socket.create_connection(("127.0.0.1", port))
        busy.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_for(lambda: app.running == 1, "the page being built")
        others = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        busy.settimeout(20)
        answer = b""
        while not answer.endswith(PAGE):
            chunk = busy.recv(65536)
            assert chunk, "the connection being answered was shed"
            answer += chunk
        for sock in [busy, *others]:
            sock.close()


def test_a_request_head_that_never_ends_is_closed_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gputop.core.exporter.http_server.HEAD_DEADLINE_S", 0.5)
    with _server(SlowApp()) as (_, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(10)
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - started < 9


def test_a_stalled_tls_handshake_blocks_nobody(tmp_path: Path) -> None:
    """prometheus_client's server made the TLS handshake in its accepting thread: one client
    that never said hello stopped every scrape."""
    openssl = shutil.which("openssl")
    if openssl is None:
        cannot("needs openssl(1) to make a certificate (.ci/run installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    args = ["--fake", "demo", "--listen", "127.0.0.1:0", "--tls-cert", str(cert)]
    with running_exporter(*args, "--tls-key", str(key)) as exporter:
        host_port = exporter.url.split("//")[1].split("/")[0].rsplit(":", 1)
        silent = [socket.create_connection((host_port[0], int(host_port[1]))) for _ in range(20)]
        try:
            context = ssl.create_default_context(cafile=str(cert))
            with urllib.request.urlopen(exporter.url, timeout=5, context=context) as response:
                assert b"DCGM_FI_DEV_GPU_UTIL" in response.read()
        finally:
            for sock in silent:
                sock.close()


def test_two_hundred_concurrent_scrapes_are_all_answered() -> None:
    args = ("--fake", "demo", "--listen", "127.0.0.1:0", "--interval", "3600")
    with running_exporter(*args) as exporter:
        barrier = threading.Barrier(CONCURRENT_SCRAPES)

        def scrape(_: int) -> str:
            barrier.wait(timeout=60)
            return http_get(exporter.url, timeout_s=30)

        with concurrent.futures.ThreadPoolExecutor(CONCURRENT_SCRAPES) as pool:
            pages = list(pool.map(scrape, range(CONCURRENT_SCRAPES)))
    assert all("DCGM_FI_DEV_GPU_UTIL" in page for page in pages)


def test_a_page_that_fails_to_build_is_a_500_and_the_next_one_is_built_again() -> None:
    class Failing(SlowApp):
        def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
            self.builds += 1
            if self.builds == 1:
                raise RuntimeError("a collector failed")
            return super().__call__(environ, start_response)

    app = Failing()
    with _server(app) as (_, port):
        first = _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 500 ") and b"RuntimeError" in first
        assert b"Connection: close" in first
        again = _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert again.startswith(b"HTTP/1.1 200 OK") and again.endswith(PAGE)
