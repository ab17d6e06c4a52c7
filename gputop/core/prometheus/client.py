"""A Prometheus server's HTTP API: instant and range queries (docs/fleet.md, docs/exporter.md).

With ``urllib`` (no new dependency), from a server that may be broken or hostile
(docs/security.md, "A hostile Prometheus"): one ``Budget``'s deadline bounds the whole of
every request (a server sending a byte every half second is cut off at it), redirects go to
http(s) only, and every message names the server without its credentials. The answer is
decoded as it arrives (answer.py).
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from gputop.core.prometheus.answer import (
    MAX_TOTAL_BYTES,
    TIMEOUT_S,
    Answer,
    Budget,
    PrometheusError,
    ReadFailed,
    Sample,
    Series,
    one_line,
    too_slow,
    walk,
)
from gputop.core.prometheus.auth import Server, check_url, server_for

__all__ = [
    "MAX_TOTAL_BYTES",
    "TIMEOUT_S",
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

MAX_TIMEOUT_S = 86400.0
MAX_POINTS = 10_000
"""Points per series asked for; Prometheus refuses more than 11,000."""
MAX_ERROR_BYTES = 64 << 10
"""What is read of an answer that is an HTTP error."""
NO_MAXIMUM = 1e300
_READ_BYTES = 1 << 16


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
    answer = Answer(server.shown, budget, "matrix", maximum, (start, end), most)
    _ask(server, "query_range", params, budget, answer)
    return answer.checked_series()


def query(
    where: Server | str,
    promql: str,
    budget: Budget | None = None,
    maximum: float = NO_MAXIMUM,
) -> list[Sample]:
    """Every series of the instant vector ``promql`` gives now; values above ``maximum``
    are unknown."""
    server = _server(where)
    budget = budget if budget is not None else Budget()
    answer = Answer(server.shown, budget, "vector", maximum, None, 1)
    _ask(server, "query", {"query": promql}, budget, answer)
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

    def past_deadline(self, budget: Budget) -> bool:
        """Whether the request ended for its deadline: the timer shut its sockets, or it
        was connected and the deadline has passed (the socket's own timeout, the same
        deadline, may fire before the timer's thread does)."""
        return self.expired or (bool(self.sockets) and budget.seconds_left() <= 0)

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
    server: Server, endpoint: str, params: dict[str, str], budget: Budget, answer: Answer
) -> None:
    """GET ``endpoint`` with ``params``; the answer read into ``answer`` as it arrives."""
    left = budget.seconds_left()
    url = server.shown
    if left <= 0:
        raise too_slow(url, budget)
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
                walk(url, _reader(url, response, budget, watch), answer)
        except urllib.error.HTTPError as error:
            raise _http_error(url, error, watch) from None
        except PrometheusError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watch.past_deadline(budget):
                raise too_slow(url, budget) from None
            reason = unreachable_reason(error)
            raise PrometheusError(
                f"Cannot reach Prometheus at {url}: {one_line(reason)}."
            ) from None
    finally:
        timer.cancel()
        watch.expire()  # nothing of this request is left open


def _reader(url: str, response: Any, budget: Budget, watch: _Watch) -> Callable[[], bytes]:
    """The answer's next bytes, counted against the budget as they arrive."""

    def read() -> bytes:
        try:
            chunk = response.read(_READ_BYTES)
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watch.past_deadline(budget):
                raise too_slow(url, budget) from None
            raise ReadFailed() from error
        if watch.past_deadline(budget):
            raise too_slow(url, budget)
        if budget.spend(read=len(chunk)).bytes_read > budget.max_bytes:
            raise PrometheusError(
                f"Prometheus at {url} answered more than {budget.max_bytes >> 20} MiB in all "
                f"for this {budget.what}: {budget.advice}."
            )
        return bytes(chunk)

    return read


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
