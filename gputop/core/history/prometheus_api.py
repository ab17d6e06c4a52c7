"""A Prometheus server's HTTP API, read for ``gputop report --prometheus`` (docs/exporter.md).

Only ``/api/v1/query_range``, with ``urllib`` (no new dependency). Everything that comes
back is outside data, from a server that may be broken or hostile (docs/security.md,
"A hostile Prometheus"):

- one ``Budget`` bounds the whole report, all its queries together: a deadline
  (``--timeout``, for the whole of every request, not each read: a server that sends a byte
  every half second is cut off at it), bytes read and series kept in all;
- the document must have the shape the API documents; it is walked one series at a time
  (never parsed whole: Python objects cost about ten times the text), one nested too deeply
  or holding a number of more than 400 digits is "not an answer", never an internal error;
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
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from array import array
from collections.abc import Callable
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
MAX_SERIES = 200_000
"""Series in all the answers of one report: a few hundred hosts' processes, card by card."""
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
    times: array[float]
    """Evaluation times (seconds since the epoch) of the points inside the window."""
    values: array[float]
    """Their values; NaN where the value was out of range (unknown, the point present)."""

    @property
    def points(self) -> dict[float, float | None]:
        """Time -> value, ``None`` where unknown."""
        return {
            at: None if math.isnan(value) else value
            for at, value in zip(self.times, self.values, strict=True)
        }


@dataclass
class Budget:
    """What one report may spend on the server: seconds (a deadline) and bytes."""

    timeout_s: float = TIMEOUT_S
    max_bytes: int = 0
    """0: ``MAX_TOTAL_BYTES``."""
    deadline: float = field(init=False)
    bytes_read: int = field(default=0, init=False)
    series: int = field(default=0, init=False)

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
    answer = _Answer(url, start, end, maximum, budget)
    return _parse(url, _fetch(url, address, budget), answer)


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

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
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


class _Answer:
    """One answer, read one series at a time (``_parse``): only the envelope's few small
    values and each series in turn are ever Python objects, never the whole document; each
    series is kept compact (``Series``) at once. What it said is checked at the end."""

    def __init__(self, url: str, start: float, end: float, maximum: float, budget: Budget):
        self.url = url
        self.first, self.last = start - _TIME_SLACK_S, end + _TIME_SLACK_S
        self.maximum = maximum
        self.budget = budget
        self.status: object = None
        self.error: object = None
        self.result_type: object = None
        self.series: list[Series] | None = None
        self.items = 0

    def top(self, key: str, text: str, at: int) -> int:
        if key == "data" and text.startswith("{", at):
            return _object(text, at, self.data)
        value, at = _DECODER.raw_decode(text, at)  # anything else: decoded whole, then checked
        if key == "status":
            self.status = value
        elif key == "error":
            self.error = value
        elif key == "data":
            self.result_type = None  # not an object: no matrix
        return at

    def data(self, key: str, text: str, at: int) -> int:
        if key == "result" and text.startswith("[", at):
            self.series = []
            return _array(text, at, self.add)
        value, at = _DECODER.raw_decode(text, at)
        if key == "resultType":
            self.result_type = value
        elif key == "result":
            self.series = None  # not a list: said below
        return at

    def add(self, item: object) -> None:
        self.items += 1
        if self.items % 1024 == 0 and self.budget.seconds_left() <= 0:
            raise _too_slow(self.url, self.budget)  # the deadline holds while reading, too
        series = _one(item, self.first, self.last, self.maximum)
        if series is None or self.series is None:
            return
        self.budget.series += 1
        if self.budget.series > MAX_SERIES:
            raise PrometheusError(
                f"Prometheus at {self.url} answered more than {MAX_SERIES:,} series in all for "
                "this report: shorten --since, or ask --by user or gpu."
            )
        self.series.append(series)

    def checked(self) -> list[Series]:
        url = self.url
        if self.status != "success":
            text = one_line(self.error) if isinstance(self.error, str) else "no reason given"
            raise PrometheusError(f"Prometheus at {url} refused the query: {text}.")
        if self.result_type != "matrix":
            raise PrometheusError(f"{url} did not answer a range query with a matrix.")
        if self.series is None:
            raise PrometheusError(f"{url} did not answer a range query with a list of series.")
        return self.series


def _bounded_int(text: str) -> int:
    """A JSON integer of at most ``MAX_VALUE_CHARS`` digits (Python 3.11 and later refuse
    more than 4,300 themselves; 3.10 would spend quadratic time on them)."""
    if len(text) > MAX_VALUE_CHARS:
        raise ValueError("an integer too long")
    return int(text)


_DECODER = json.JSONDecoder(parse_int=_bounded_int)
_SPACE = re.compile(r"[ \t\n\r]*")


def _parse(url: str, body: bytes, answer: _Answer) -> list[Series]:
    """The answer's series, the document walked by hand down to ``data.result`` and each of
    its items decoded alone (a whole document of small series costs ten times its size as
    Python objects)."""
    try:
        text = body.decode("utf-8")
        del body
        at = _object(text, _skip(text, 0), answer.top)
        if _skip(text, at) != len(text):
            raise ValueError("more after the document")
    except RecursionError:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (JSON nested too deeply)."
        ) from None
    except (ValueError, IndexError, TypeError):  # not JSON, not UTF-8, digits past Python's
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (not JSON)."
        ) from None
    return answer.checked()


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _object(text: str, at: int, value: Callable[[str, str, int], int]) -> int:
    """An object at ``at``: ``value(key, text, position)`` reads each value and gives the
    position after it. Gives the position after the object."""
    if not text.startswith("{", at):
        raise ValueError("not an object")
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        return at + 1
    while True:
        key, at = _DECODER.raw_decode(text, at)
        if not isinstance(key, str):
            raise ValueError("a key that is not a string")
        at = _skip(text, at)
        if not text.startswith(":", at):
            raise ValueError("no colon")
        at = _skip(text, value(key, text, _skip(text, at + 1)))
        if text.startswith(",", at):
            at = _skip(text, at + 1)
        elif text.startswith("}", at):
            return at + 1
        else:
            raise ValueError("no comma")


def _array(text: str, at: int, item: Callable[[object], None]) -> int:
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return at + 1
    while True:
        value, at = _DECODER.raw_decode(text, at)
        item(value)
        at = _skip(text, at)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
        elif text.startswith("]", at):
            return at + 1
        else:
            raise ValueError("no comma")


def _one(item: object, first: float, last: float, maximum: float) -> Series | None:
    if not isinstance(item, dict):
        return None
    metric, values = item.get("metric"), item.get("values")
    if not isinstance(metric, dict) or not isinstance(values, list):
        return None
    labels = {str(k): v for k, v in metric.items() if isinstance(v, str)}
    times, numbers = array("d"), array("d")
    for value in values:
        if not isinstance(value, list) or len(value) != 2:
            continue
        at, text = value
        if not within(at, first, last):  # outside the window asked for: not counted
            continue
        number = _value(text, maximum)
        times.append(float(at))
        numbers.append(math.nan if number is None else number)
    return Series(labels, times, numbers)


def _value(text: object, maximum: float) -> float | None:
    """A sample's value (the API writes it as a string): finite, 0 to ``maximum``."""
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if within(number, 0, maximum) else None
