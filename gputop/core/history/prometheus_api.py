"""A Prometheus server's HTTP API, read for ``gputop report --prometheus`` (docs/exporter.md).

Only ``/api/v1/query_range``, with ``urllib`` (no new dependency). Everything that comes
back is outside data, from a server that may be broken or hostile (docs/security.md,
"A hostile Prometheus"):

- one ``Budget`` bounds the whole report, all its queries together: a deadline
  (``--timeout``, for the whole of every request, not each read: a server that sends a byte
  every half second is cut off at it) and a number of bytes read in all;
- the document must have the shape the API documents; one nested too deeply or holding a
  number too long for Python is "not an answer", never an internal error;
- every point is checked where it enters: its time inside the window asked for, its value
  finite, not negative and at most the figure's maximum (memory: 1 PiB, as for lab hosts),
  else that value is unknown;
- an error's text is cut to one line of at most 200 characters.

Label values stay raw here, to be cleaned where they are shown.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from gputop.core.errors import GputopError, UsageError
from gputop.core.numbers import within

TIMEOUT_S = 60.0
"""The default ``--timeout``: the most seconds the whole report may take."""
MAX_TIMEOUT_S = 86400.0
MAX_POINTS = 10_000
"""Points per series asked for; Prometheus refuses more than 11,000."""
MAX_TOTAL_BYTES = 128 << 20
"""What all the answers of one report may hold together (a report asks four queries): each
answer is read, checked and dropped before the next query, its points kept as numbers
only; docs/exporter.md has the memory this costs at most."""
MAX_ERROR_BYTES = 64 << 10
"""What is read of an answer that is an HTTP error."""
MAX_MESSAGE_CHARS = 200
MAX_VALUE_CHARS = 400
"""Prometheus writes 1e300 as 301 digits; a longer text is no value it sends."""
NO_MAXIMUM = 1e300
_READ_BYTES = 1 << 16
_TIME_SLACK_S = 0.001
"""The window is sent with three decimals: a point at its very edge may differ by that."""


class PrometheusError(GputopError):
    """The Prometheus server could not be reached or did not answer as its API says."""


@dataclass(frozen=True, slots=True)
class Series:
    labels: dict[str, str]
    points: dict[float, float | None]
    """Evaluation time (seconds since the epoch) -> value, for the points inside the window;
    ``None`` where the value was out of range (unknown, the point still present)."""


@dataclass
class Budget:
    """What one report may spend on the server: seconds (a deadline) and bytes."""

    timeout_s: float = TIMEOUT_S
    max_bytes: int = 0
    """0: ``MAX_TOTAL_BYTES``."""
    deadline: float = field(init=False)
    bytes_read: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout_s
        self.max_bytes = self.max_bytes or MAX_TOTAL_BYTES

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


def check_url(url: str) -> str:
    """``url`` without its trailing slash, or a ``UsageError`` naming what to give."""
    wanted = (
        f"--prometheus {url!r}: give the server's http:// or https:// address, e.g. "
        "http://127.0.0.1:9090"
    )
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        raise UsageError(f"{wanted} (no spaces or control characters).")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a port that is not a number from 0 to 65535: ValueError
        host = parts.hostname
    except ValueError as error:
        raise UsageError(f"{wanted} ({error}).") from None
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"{wanted}.")
    if port == 0:
        raise UsageError(f"{wanted} (port 0 is no server's).")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise UsageError(f"{wanted}, without ? or #.")
    return url.rstrip("/")


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters, for a message."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def query_range(
    url: str,
    promql: str,
    start: float,
    end: float,
    step_s: float,
    budget: Budget | None = None,
    maximum: float = NO_MAXIMUM,
) -> list[Series]:
    """Every series ``promql`` gives over ``[start, end]`` at ``step_s``; values above
    ``maximum`` are unknown. ``budget`` is shared by the queries of one report."""
    budget = budget if budget is not None else Budget()
    params = urllib.parse.urlencode(
        {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
    )
    address = f"{check_url(url)}/api/v1/query_range?{params}"
    body = _fetch(url, address, budget)
    document = _document(url, body)
    del body  # the answer's text, dropped before its series are kept
    return _series(url, document, start, end, maximum)


class _Watch:
    """The sockets of one request, shut down when the budget's deadline passes: a blocked
    read (of the status line, a header or the body) then ends at once."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.expired = False
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self.sockets.append(sock)
            if self.expired:
                _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self.sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the plain socket's, also under TLS: reads end
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> Any:
    class Watched(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            watch.add(self.sock)

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self._watch = watch

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self._watch), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self._watch = watch

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = _watched(http.client.HTTPSConnection, self._watch)
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]


class _HTTPOnly(urllib.request.HTTPRedirectHandler):
    """Redirects are followed to http:// and https:// only (not ftp:, which urllib would)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            return None  # urllib then reports the redirect as the HTTP error it is
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch(url: str, address: str, budget: Budget) -> bytes:
    left = budget.seconds_left()
    if left <= 0:
        raise _too_slow(url, budget)
    watch = _Watch()
    timer = threading.Timer(left, watch.expire)
    timer.daemon = True
    timer.start()
    opener = urllib.request.build_opener(_HTTPHandler(watch), _HTTPSHandler(watch), _HTTPOnly())
    try:
        try:
            with opener.open(address, timeout=left) as response:
                return _read(url, response, budget, watch)
        except urllib.error.HTTPError as error:
            raise _http_error(url, error, watch) from None
        except PrometheusError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watch.expired:
                raise _too_slow(url, budget) from None
            reason = str(getattr(error, "reason", None) or error) or type(error).__name__
            raise PrometheusError(
                f"Cannot reach Prometheus at {url}: {one_line(reason)}."
            ) from None
    finally:
        timer.cancel()
        watch.expire()  # nothing of this request is left open


def _read(url: str, response: Any, budget: Budget, watch: _Watch) -> bytes:
    chunks: list[bytes] = []
    while True:
        try:
            chunk = response.read(_READ_BYTES)
        except (OSError, http.client.HTTPException, ValueError):
            if watch.expired:
                raise _too_slow(url, budget) from None
            raise
        if watch.expired:
            raise _too_slow(url, budget)
        if not chunk:
            return b"".join(chunks)
        budget.bytes_read += len(chunk)
        if budget.bytes_read > budget.max_bytes:
            raise PrometheusError(
                f"Prometheus at {url} answered more than {budget.max_bytes >> 20} MiB in all "
                "for this report: shorten --since, or ask --by user or gpu."
            )
        chunks.append(chunk)


def _too_slow(url: str, budget: Budget) -> PrometheusError:
    return PrometheusError(
        f"Prometheus at {url} did not answer within --timeout {budget.timeout_s:g} s (for the "
        "whole report): give a longer --timeout, or a shorter --since."
    )


def _http_error(url: str, error: urllib.error.HTTPError, watch: _Watch) -> PrometheusError:
    """HTTP 4xx/5xx: the API's error text where it gave one, cut to one line."""
    try:
        body = error.read(MAX_ERROR_BYTES)
    except (OSError, http.client.HTTPException, ValueError):
        body = b""
    finally:
        error.close()
    refusal = _api_error(body)
    if refusal is not None and refusal.strip():  # the API's own words, as for HTTP 200
        return PrometheusError(
            f"Prometheus at {url} refused the query (HTTP {error.code}): {one_line(refusal)}."
        )
    detail = body.decode("utf-8", "replace")
    if not detail.strip() or watch.expired:
        return PrometheusError(f"Prometheus at {url} answered HTTP {error.code}.")
    return PrometheusError(f"Prometheus at {url} answered HTTP {error.code}: {one_line(detail)}.")


def _api_error(body: bytes) -> str | None:
    """The ``error`` of an API error document, if ``body`` is one."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return str(document["error"])
    return None


def _document(url: str, body: bytes) -> object:
    try:
        return json.loads(body)
    except RecursionError:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (JSON nested too deeply)."
        ) from None
    except ValueError:  # not JSON, not UTF-8, or a number too long for Python
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (not JSON)."
        ) from None


def _series(url: str, document: object, start: float, end: float, maximum: float) -> list[Series]:
    if not isinstance(document, dict):
        raise PrometheusError(f"{url} did not answer as Prometheus's API does.")
    if document.get("status") != "success":
        error = document.get("error")
        text = one_line(error) if isinstance(error, str) else "no reason given"
        raise PrometheusError(f"Prometheus at {url} refused the query: {text}.")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError(f"{url} did not answer a range query with a matrix.")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{url} did not answer a range query with a list of series.")
    first, last = start - _TIME_SLACK_S, end + _TIME_SLACK_S
    return [series for item in result if (series := _one(item, first, last, maximum))]


def _one(item: object, first: float, last: float, maximum: float) -> Series | None:
    if not isinstance(item, dict):
        return None
    metric, values = item.get("metric"), item.get("values")
    if not isinstance(metric, dict) or not isinstance(values, list):
        return None
    labels = {str(k): v for k, v in metric.items() if isinstance(v, str)}
    points: dict[float, float | None] = {}
    for value in values:
        if not isinstance(value, list) or len(value) != 2:
            continue
        at, text = value
        if not within(at, first, last):  # outside the window asked for: not counted
            continue
        points[float(at)] = _value(text, maximum)
    return Series(labels, points)


def _value(text: object, maximum: float) -> float | None:
    """A sample's value (the API writes it as a string): finite, 0 to ``maximum``."""
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if within(number, 0, maximum) else None
