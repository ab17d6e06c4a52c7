"""A client's ``Accept`` header at the exporter (found by attacking it): prometheus_client
chooses the page's format from it and writes the version the client gave back into the
Content-Type, so ``version=2.x<LF>X-Evil: 1`` put a header line of the client's into the
exporter's answer, and a version it compares with numbers (``version=1<NUL>``) raised
TypeError: a 500 saying the page could not be built, the exporter's fault. Either is now a
400 naming the header; Prometheus's own Accept is answered as before. The exporter's own
server and prometheus_client's WSGI app, on loopback; docs/exporter.md."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app

from gputop.core.exporter.http_server import BoundedServer

PROMETHEUS_ACCEPT = (
    b"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
    b"application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;"
    b"escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    registry = CollectorRegistry()
    Gauge("gputop_test_up", "A figure.", registry=registry).set(1)
    server = BoundedServer(make_wsgi_app(registry), lambda: 1, "127.0.0.1", 0)
    try:
        yield server.start()
    finally:
        server.stop()


def head_of(port: int, accept: bytes) -> bytes:
    request = b"GET /metrics HTTP/1.1\r\nAccept: " + accept + b"\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.partition(b"\r\n\r\n")[0]


@pytest.mark.parametrize(
    "accept",
    [
        b"application/openmetrics-text; version=2.x\nX-Evil: injected",
        b"application/openmetrics-text; version=2.x\rX-Evil: injected",
        b"application/openmetrics-text; version=2.x\x1b]0;t\x07",
        b"application/openmetrics-text; version=1\x00",
        b"text/plain; version=1.0.0x",
    ],
)
def test_an_accept_header_that_cannot_be_answered_is_a_400(port: int, accept: bytes) -> None:
    head = head_of(port, accept)
    assert head.startswith(b"HTTP/1.1 400 "), head
    assert b"X-Evil" not in head and all(32 <= byte < 127 for byte in head.replace(b"\r\n", b""))


def test_prometheus_s_accept_and_none_are_answered_as_before(port: int) -> None:
    assert b"Content-Type: application/openmetrics-text; version=1.0.0" in head_of(
        port, PROMETHEUS_ACCEPT
    )
    assert b"Content-Type: text/plain; version=0.0.4" in head_of(port, b"*/*")
