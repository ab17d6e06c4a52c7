"""A Prometheus server's HTTP API: instant and range queries (docs/fleet.md, docs/exporter.md).

With ``urllib`` (no new dependency). Everything that comes back is outside data, from a
server that may be broken or hostile (docs/security.md, "A hostile Prometheus"):

- one ``Budget`` bounds a whole report or fleet refresh, all its queries together: a
  deadline (``--timeout``, for the whole of every request, not each read: a server that
  sends a byte every half second is cut off at it), bytes read, series and points kept;
- the answer is read as it arrives and never held whole (gputop/core/prometheus/stream.py):
  what is kept is each series' labels and its points as arrays of numbers, at most as many
  points per series as the query asked for, so memory stays bounded by what the budget
  keeps, not by what a server sends (one series of 15 M points once took 1.7 GB);
- the document must have the shape the API documents; one nested too deeply, holding a
  number of more than 400 digits or a value of more than a megabyte is "not an answer",
  never an internal error;
- every value is checked where it enters: its time inside the window asked for (range
  queries), its value finite, not negative and at most the figure's maximum, else unknown;
- an error's text is cut to one line of at most 200 characters; the URL in every message is
  the server's without credentials.

Label values stay raw here, to be cleaned where they are shown.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import math
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

from gputop.core.errors import GputopError
from gputop.core.numbers import within
from gputop.core.prometheus.auth import Server, check_url, server_for
from gputop.core.prometheus.stream import (
    Stream,
    TooLarge,
    points,
    walk_array,
    walk_object,
)

__all__ = [
    "Budget",
    "PrometheusError",
    "Sample",
    "Series",
    "Server",
    "check_url",
    "query",
    "query_range",
    "server_for",
]

TIMEOUT_S = 60.0
"""The default ``--timeout`` of a report: the most seconds the whole of it may take."""
MAX_TIMEOUT_S = 86400.0
MAX_POINTS = 10_000
"""Points per series asked for; Prometheus refuses more than 11,000."""
MAX_TOTAL_BYTES = 128 << 20
"""What all the answers of one report or refresh may hold together, read as they arrive."""
MAX_SERIES = 200_000
"""Series (or instant samples) in all the answers of one report or refresh."""
MAX_ERROR_BYTES = 64 << 10
"""What is read of an answer that is an HTTP error."""
MAX_MESSAGE_CHARS = 200
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


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query's answer."""

    labels: dict[str, str]
    time: float | None
    """When Prometheus evaluated it (seconds since the epoch), None if no valid time."""
    value: float | None
    """None where unknown: not a number, infinite, negative or above the figure's maximum."""


@dataclass
class Budget:
    """What one report or refresh may spend on the server: seconds (a deadline) and bytes."""

    timeout_s: float = TIMEOUT_S
    max_bytes: int = 0
    """0: ``MAX_TOTAL_BYTES``."""
    what: str = "report"
    """What the budget is for, as messages name it ("report", "refresh")."""
    advice: str = "shorten --since, or ask --by user or gpu"
    deadline: float = field(init=False)
    bytes_read: int = field(default=0, init=False)
    series: int = field(default=0, init=False)
    queries: int = field(default=0, init=False)

    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout_s
        self.max_bytes = self.max_bytes or MAX_TOTAL_BYTES

    def spend(self, read: int = 0, series: int = 0, queries: int = 0) -> Budget:
        """Count what one request spent (requests of one budget may run at once)."""
        with self._lock:
            self.bytes_read += read
            self.series += series
            self.queries += queries
        return self

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters, for a message."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_UNREACHABLE = {
    errno.ECONNREFUSED: "nothing answers at that address (connection refused)",
    errno.ETIMEDOUT: "no answer in time: a firewall, or a host that is down (timed out)",
    errno.EHOSTUNREACH: "that host cannot be reached from here (no route to host)",
    errno.ENETUNREACH: "its network cannot be reached from here (network unreachable)",
}


def unreachable_reason(error: BaseException) -> str:
    """Why a server could not be reached, in words: ``nothing answers at that address
    (connection refused)``, not ``[Errno 111] Connection refused``."""
    cause = getattr(error, "reason", None)  # urllib's URLError wraps the socket's error
    if isinstance(error, urllib.error.URLError) and isinstance(cause, BaseException):
        return unreachable_reason(cause)
    if isinstance(error, socket.gaierror):
        return f"no such host name, or no name server answered ({error.strerror or error})"
    if isinstance(error, TimeoutError) and error.errno is None:
        return _UNREACHABLE[errno.ETIMEDOUT]
    if isinstance(error, OSError) and error.errno in _UNREACHABLE:
        return _UNREACHABLE[error.errno]
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(cause or error) or type(error).__name__


def _server(where: Server | str) -> Server:
    return where if isinstance(where, Server) else server_for(where)


def query_range(
    where: Server | str,
    promql: str,
    start: float,
    end: float,
    step_s: float,
    budget: Budget | None = None,
    maximum: float = NO_MAXIMUM,
) -> list[Series]:
    """Every series ``promql`` gives over ``[start, end]`` at ``step_s``; values above
    ``maximum`` are unknown. ``budget`` is shared by the queries of one report."""
    server = _server(where)
    budget = budget if budget is not None else Budget()
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
    most = min(MAX_POINTS, int((end - start) / step_s + 1e-9)) + 1 if step_s > 0 else 1
    answer = _Answer(server.shown, budget, "matrix", maximum, (start, end), most)
    _ask(server, "query_range", params, budget, answer)
    return answer.checked_series()


def query(
    where: Server | str,
    promql: str,
    budget: Budget | None = None,
    maximum: float = NO_MAXIMUM,
    at: float | None = None,
) -> list[Sample]:
    """Every series of the instant vector ``promql`` gives (at ``at``, else now); values
    above ``maximum`` are unknown."""
    server = _server(where)
    budget = budget if budget is not None else Budget()
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    answer = _Answer(server.shown, budget, "vector", maximum, None, 1)
    _ask(server, "query", params, budget, answer)
    return answer.checked_samples()


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
    def __init__(self, watch: _Watch, context: Any = None) -> None:
        super().__init__(context=context)
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


def _ask(
    server: Server, endpoint: str, params: dict[str, str], budget: Budget, answer: _Answer
) -> None:
    """GET ``endpoint`` with ``params``; the answer read into ``answer`` as it arrives."""
    left = budget.seconds_left()
    url = server.shown
    if left <= 0:
        raise _too_slow(url, budget)
    budget.spend(queries=1)
    address = f"{server.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(address, headers={"Accept": "application/json"})
    if server.authorization is not None:  # never passed on to where a redirect points
        request.add_unredirected_header("Authorization", server.authorization)
    watch = _Watch()
    timer = threading.Timer(left, watch.expire)
    timer.daemon = True
    timer.start()
    context = server.tls_context()
    opener = urllib.request.build_opener(
        _HTTPHandler(watch), _HTTPSHandler(watch, context), _HTTPOnly()
    )
    try:
        try:
            with opener.open(request, timeout=left) as response:
                _walk(url, _reader(url, response, budget, watch), answer)
        except urllib.error.HTTPError as error:
            raise _http_error(url, error, watch) from None
        except PrometheusError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watch.expired:
                raise _too_slow(url, budget) from None
            reason = unreachable_reason(error)
            raise PrometheusError(
                f"Cannot reach Prometheus at {url}: {one_line(reason)}."
            ) from None
    finally:
        timer.cancel()
        watch.expire()  # nothing of this request is left open


class _ReadFailed(Exception):
    """Reading the answer failed (not its content): the original error is its cause."""


def _reader(url: str, response: Any, budget: Budget, watch: _Watch) -> Callable[[], bytes]:
    """The answer's next bytes, counted against the budget as they arrive."""

    def read() -> bytes:
        try:
            chunk = response.read(_READ_BYTES)
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watch.expired:
                raise _too_slow(url, budget) from None
            raise _ReadFailed() from error
        if watch.expired:
            raise _too_slow(url, budget)
        if budget.spend(read=len(chunk)).bytes_read > budget.max_bytes:
            raise PrometheusError(
                f"Prometheus at {url} answered more than {budget.max_bytes >> 20} MiB in all "
                f"for this {budget.what}: {budget.advice}."
            )
        return bytes(chunk)

    return read


def _too_slow(url: str, budget: Budget) -> PrometheusError:
    if budget.what == "report":
        hint = "give a longer --timeout, or a shorter --since"
    else:
        hint = "give a longer --timeout"
    return PrometheusError(
        f"Prometheus at {url} did not answer within --timeout {budget.timeout_s:g} s (for the "
        f"whole {budget.what}): {hint}."
    )


def _http_error(url: str, error: urllib.error.HTTPError, watch: _Watch) -> PrometheusError:
    """HTTP 4xx/5xx: the API's error text where it gave one, cut to one line."""
    try:
        body = error.read(MAX_ERROR_BYTES)
    except (OSError, http.client.HTTPException, ValueError):
        body = b""
    finally:
        error.close()
    if error.code == 401:
        return PrometheusError(
            f"Prometheus at {url} asks to sign in (HTTP 401): give --prometheus-auth-file "
            "with 'user:password' or 'bearer TOKEN' (a wrong one is refused the same way)."
        )
    if error.code == 403:
        return PrometheusError(f"Prometheus at {url} refused these credentials (HTTP 403).")
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
    """One answer, walked as it arrives: only the envelope's few small values and one
    series (its labels, then its points one batch at a time) are ever Python objects; each
    series is kept compact at once. What the envelope said is checked at the end."""

    def __init__(
        self,
        url: str,
        budget: Budget,
        result_type: str,
        maximum: float,
        window: tuple[float, float] | None,
        most_points: int,
    ) -> None:
        self.url = url
        self.budget = budget
        self.wanted_type = result_type
        self.maximum = maximum
        self.window = (
            (window[0] - _TIME_SLACK_S, window[1] + _TIME_SLACK_S) if window is not None else None
        )
        self.most_points = most_points
        self.stream: Stream | None = None
        self.status: object = None
        self.error: object = None
        self.result_type: object = None
        self.series: list[Series] | None = None
        self.samples: list[Sample] | None = None
        self.items = 0

    # The envelope: {"status": ..., "data": {"resultType": ..., "result": [...]}, ...}
    def top(self, key: str) -> None:
        stream = self._stream()
        if key == "data" and stream.peek() == "{":
            walk_object(stream, self.data)
            return
        value = stream.value()
        if key == "status":
            self.status = value
        elif key == "error":
            self.error = value

    def data(self, key: str) -> None:
        stream = self._stream()
        if key == "result" and stream.peek() == "[":
            self.series, self.samples = [], []
            walk_array(stream, self.item)
            return
        value = stream.value()
        if key == "resultType":
            self.result_type = value
        elif key == "result":
            self.series = self.samples = None  # not a list: said below

    def item(self) -> None:
        stream = self._stream()
        self.items += 1
        if self.items % 1024 == 0 and self.budget.seconds_left() <= 0:
            raise _too_slow(self.url, self.budget)  # the deadline holds while reading, too
        if stream.peek() != "{":
            stream.value()  # not a series: skipped
            return
        found = _Item(self)
        if self.wanted_type == "vector":  # one sample: small, decoded whole at C's speed
            item = stream.value()
            if isinstance(item, dict):
                found.take(item)
            return
        walk_object(stream, found.member)
        found.keep()

    def _stream(self) -> Stream:
        assert self.stream is not None
        return self.stream

    def count_one(self) -> None:
        if self.budget.spend(series=1).series > MAX_SERIES:
            raise PrometheusError(
                f"Prometheus at {self.url} answered more than {MAX_SERIES:,} series in all for "
                f"this {self.budget.what}: {self.budget.advice}."
            )

    def _checked(self) -> None:
        if self.status != "success":
            text = one_line(self.error) if isinstance(self.error, str) else "no reason given"
            raise PrometheusError(f"Prometheus at {self.url} refused the query: {text}.")
        kind = (
            "a range query with a matrix"
            if self.wanted_type == "matrix"
            else ("a query with an instant vector")
        )
        if self.result_type != self.wanted_type:
            raise PrometheusError(f"{self.url} did not answer {kind}.")
        if self.series is None or self.samples is None:
            raise PrometheusError(f"{self.url} did not answer {kind} of series.")

    def checked_series(self) -> list[Series]:
        self._checked()
        assert self.series is not None
        return self.series

    def checked_samples(self) -> list[Sample]:
        self._checked()
        assert self.samples is not None
        return self.samples


class _Item:
    """One item of ``data.result``: ``metric`` and ``values`` (a matrix) or ``value``."""

    def __init__(self, answer: _Answer) -> None:
        self.answer = answer
        self.labels: dict[str, str] | None = None
        self.times: array[float] = array("d")
        self.values: array[float] = array("d")
        self.has_values = False
        self.instant: object = None

    def member(self, key: str) -> None:
        answer = self.answer
        stream = answer._stream()
        if key == "values" and answer.wanted_type == "matrix" and stream.peek() == "[":
            self.has_values = True
            points(stream, self.point)
            return
        value = stream.value()
        if key == "metric" and isinstance(value, dict):
            self.labels = {str(k): v for k, v in value.items() if isinstance(v, str)}
        elif key == "value":
            self.instant = value

    def take(self, item: dict[str, object]) -> None:
        """An instant vector's item, decoded whole."""
        metric = item.get("metric")
        if isinstance(metric, dict):
            if all(type(v) is str for v in metric.values()):  # keys are strings in JSON
                self.labels = metric
            else:
                self.labels = {str(k): v for k, v in metric.items() if isinstance(v, str)}
        self.instant = item.get("value")
        self.keep()

    def point(self, point: object) -> None:
        if not isinstance(point, list) or len(point) != 2:
            return
        at, text = point
        window = self.answer.window
        if window is None or not within(at, window[0], window[1]):
            return  # outside the window asked for: not counted
        if len(self.times) >= self.answer.most_points:
            return  # more points than the step asks for: they add nothing, and are not kept
        number = _value(text, self.answer.maximum)
        self.times.append(float(at))
        self.values.append(math.nan if number is None else number)

    def keep(self) -> None:
        answer = self.answer
        if self.labels is None:
            return
        if answer.wanted_type == "matrix":
            if not self.has_values or answer.series is None:
                return
            answer.count_one()
            answer.series.append(Series(self.labels, self.times, self.values))
            return
        if answer.samples is None or not isinstance(self.instant, list):
            return
        if len(self.instant) != 2:
            return
        at, text = self.instant
        evaluated = float(at) if within(at, 0, 1e11) else None
        answer.count_one()
        answer.samples.append(Sample(self.labels, evaluated, _value(text, answer.maximum)))


def _walk(url: str, read: Callable[[], bytes], answer: _Answer) -> None:
    """The answer read into ``answer``, the document walked by hand down to ``data.result``
    and each series' points decoded in batches as they arrive."""
    stream = Stream(read)
    answer.stream = stream
    try:
        walk_object(stream, answer.top)
        stream.end()
    except _ReadFailed as failed:
        cause = failed.__cause__
        reason = str(cause) or type(cause).__name__
        raise PrometheusError(
            f"Cannot read Prometheus's answer at {url}: {one_line(reason)}."
        ) from None
    except TooLarge:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (a value of more than a megabyte)."
        ) from None
    except RecursionError:
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (JSON nested too deeply)."
        ) from None
    except (ValueError, IndexError, TypeError, OverflowError):  # not JSON, not UTF-8, ...
        raise PrometheusError(
            f"{url} did not answer as Prometheus's API does (not JSON)."
        ) from None


def _value(text: object, maximum: float) -> float | None:
    """A sample's value (the API writes it as a string): finite, 0 to ``maximum``."""
    if not isinstance(text, str) or len(text) > 400:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if within(number, 0, maximum) else None
