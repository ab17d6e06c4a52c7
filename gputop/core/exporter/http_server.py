"""The exporter's HTTP(S) server: one asyncio loop, a fixed pool for the page, bounded in all.

prometheus_client's own server starts a thread per connection, with no limit and no read
deadline: one local user holding a thousand idle sockets took the exporter offline. This
one reads every connection on one thread (TLS included), gives a request's head
``HEAD_DEADLINE_S`` and an idle connection ``IDLE_S``, caps open connections (past the cap
the longest-waiting unanswered one is closed), and builds the page on ``WORKERS`` threads
with prometheus_client's WSGI app, reusing a page built within ``PAGE_CACHE_S`` for the same
sample and kind of answer. Nothing grows with the connections but the connections
themselves. docs/exporter.md, "Serving under a flood", has the limits and measurements.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import re
import resource
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.exposition import choose_encoder, gzip_accepted

from gputop.core.records import frozen

WORKERS = 2
HEAD_DEADLINE_S = 5.0
IDLE_S = 60.0
WRITE_DEADLINE_S = 10.0
PAGE_CACHE_S = 1.0
MAX_REQUEST_LINE = 8192
MAX_HEAD_BYTES = 65536
MAX_HEADERS = 100
MAX_CONNECTIONS = 256
RESERVED_DESCRIPTORS = 128
"""Kept for the rest of the exporter (/proc reads, NVML, the store of jobs)."""
BACKLOG = 128
MAX_CACHED_PAGES = 16
LINGER_S = 1.0
LINGER_BYTES = 256 * 1024

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def connection_cap(limit: int | None = None) -> int:
    """The most connections held at once: ``MAX_CONNECTIONS``, fewer when the descriptor
    limit (``RLIMIT_NOFILE``, soft) leaves less than that beside ``RESERVED_DESCRIPTORS``."""
    if limit is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = soft if soft != resource.RLIM_INFINITY else 1 << 20
    return max(8, min(MAX_CONNECTIONS, (limit - RESERVED_DESCRIPTORS) // 2))


@frozen
class Page:
    status: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


class _BadRequest(Exception):
    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class PageCache:
    """Pages by (sample generation, kind of answer): concurrent asks for one page share its
    build; a built page serves for ``PAGE_CACHE_S``, or until the next sample."""

    def __init__(self, build: Callable[[dict[str, Any]], Page], generation: Callable[[], int]):
        self._build = build
        self._generation = generation
        self._lock = threading.Lock()
        self._pages: dict[tuple[Any, ...], tuple[float, concurrent.futures.Future[Page]]] = {}
        self.builds = 0

    def get(
        self, key: tuple[Any, ...], environ: dict[str, Any], pool: concurrent.futures.Executor
    ) -> concurrent.futures.Future[Page]:
        full_key = (self._generation(), *key)
        now = time.monotonic()
        with self._lock:
            known = self._pages.get(full_key)
            if known is not None and (
                not known[1].done()
                or (now - known[0] < PAGE_CACHE_S and known[1].exception() is None)
            ):
                return known[1]
            for old in [k for k, (at, f) in self._pages.items() if f.done()]:
                if old[0] != full_key[0] or now - self._pages[old][0] >= PAGE_CACHE_S:
                    del self._pages[old]
            future = pool.submit(self._timed_build, full_key, environ)
            if len(self._pages) < MAX_CACHED_PAGES:
                self._pages[full_key] = (now, future)
            return future

    def _timed_build(self, full_key: tuple[Any, ...], environ: dict[str, Any]) -> Page:
        page = self._build(environ)
        with self._lock:
            self.builds += 1
            known = self._pages.get(full_key)
            if known is not None:  # the page is as old as its end, not its start
                self._pages[full_key] = (time.monotonic(), known[1])
        return page


def wsgi_page(app: WsgiApp) -> Callable[[dict[str, Any]], Page]:
    """Runs ``app`` once for an environ, collecting what it answers."""

    def build(environ: dict[str, Any]) -> Page:
        answered: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answered["status"], answered["headers"] = status, tuple(headers)
            return lambda data: None

        chunks = app(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        return Page(answered["status"], answered["headers"], body)

    return build


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader: asyncio.StreamReader | None = reader
        self.writer = writer


class BoundedServer:
    """Serves ``app`` on one loop thread; ``start`` gives the port, ``stop`` ends it all."""

    def __init__(
        self,
        app: WsgiApp,
        generation: Callable[[], int],
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int | None = None,
    ) -> None:
        self._host, self._port = host, port
        self._ssl = ssl_context
        self.max_connections = max_connections if max_connections is not None else connection_cap()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=WORKERS, thread_name_prefix="gputop-exporter-page"
        )
        self.cache = PageCache(wsgi_page(app), generation)
        self._loop = asyncio.new_event_loop()
        self._loop.set_default_executor(self._pool)  # nothing else may start threads
        self._loop.set_exception_handler(_quiet)
        # The connections not being answered, the one waiting longest first.
        self._waiting: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._open: set[_Connection] = set()
        self.shed = 0
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="gputop-exporter-http", daemon=True
        )

    def start(self) -> int:
        """Listens (raising ``OSError`` as ``socket.bind`` would) and gives the port."""
        self._thread.start()
        try:
            started = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
            return started.result()
        except BaseException:
            self.stop()
            raise

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(
            self._serve,
            self._host,
            self._port,
            ssl=self._ssl,
            ssl_handshake_timeout=HEAD_DEADLINE_S if self._ssl is not None else None,
            backlog=min(BACKLOG, self.max_connections),  # accepted at once, past the cap
            limit=MAX_HEAD_BYTES,
            reuse_address=True,
        )
        return int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        if self._thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
            with contextlib.suppress(Exception):
                done.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._open):
            connection.writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # One connection -------------------------------------------------------------------

    def _admit(self, connection: _Connection) -> None:
        while len(self._open) >= self.max_connections and self._waiting:
            oldest, _ = self._waiting.popitem(last=False)
            self._open.discard(oldest)
            oldest.writer.transport.abort()
            self.shed += 1
        self._open.add(connection)
        self._waiting[connection] = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(reader, writer)
        self._admit(connection)
        try:
            while True:
                try:
                    head = await self._read_head(reader)
                except _BadRequest as bad:
                    await self._answer(connection, _error_page(bad.status, bad.detail), False)
                    return
                if head is None:
                    return
                self._waiting.pop(connection, None)
                try:
                    request = _parse(head)
                except _BadRequest as bad:
                    await self._answer(connection, _error_page(bad.status, bad.detail), False)
                    return
                keep = request.keep_alive and request.method in ("GET", "OPTIONS")
                keep = keep and not request.has_body
                try:
                    page = await asyncio.wrap_future(self._page(request))
                except Exception as error:  # a collector that failed: said, not a hang
                    detail = f"the page could not be built ({type(error).__name__})"
                    page, keep = _error_page("500 Internal Server Error", detail), False
                await self._answer(connection, page, keep)
                if not keep:
                    return
                self._waiting[connection] = None  # waits again: the newest
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl.SSLError):
            return
        except asyncio.CancelledError:
            # Stopping: the connection ends here. Not raised on: Python 3.11's stream
            # callback asks a cancelled task for its exception and prints a traceback.
            return
        finally:
            self._waiting.pop(connection, None)
            self._open.discard(connection)
            writer.close()

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes | None:
        """The request's head; ``None`` when the connection ends or idles out before one."""
        first = await asyncio.wait_for(reader.read(1), IDLE_S)
        if not first:
            return None
        return await asyncio.wait_for(_rest_of_head(first, reader), HEAD_DEADLINE_S)

    def _page(self, request: _Request) -> concurrent.futures.Future[Page]:
        if request.method not in ("GET", "OPTIONS"):
            future: concurrent.futures.Future[Page] = concurrent.futures.Future()
            future.set_result(_method_not_allowed(request.method))
            return future
        accept = request.headers.get("accept")
        encoding = request.headers.get("accept-encoding")
        path, _, asked = request.target.partition("?")
        path = path or "/"
        query = _page_query(asked)
        content_type = _content_type(accept)
        if content_type is None:
            refused: concurrent.futures.Future[Page] = concurrent.futures.Future()
            refused.set_result(_error_page("400 Bad Request", "an Accept header not understood"))
            return refused
        gzipped = gzip_accepted(encoding or "")
        key = (request.method, path == "/favicon.ico", query, content_type, gzipped)
        environ = {
            "REQUEST_METHOD": request.method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "HTTP_ACCEPT": accept,
            "HTTP_ACCEPT_ENCODING": encoding,
        }
        return self.cache.get(key, {k: v for k, v in environ.items() if v is not None}, self._pool)

    async def _answer(self, connection: _Connection, page: Page, keep_alive: bool) -> None:
        self._waiting.pop(connection, None)
        lines = [f"HTTP/1.1 {page.status}"]
        lines += [f"{name}: {value}" for name, value in page.headers]
        lines.append(f"Content-Length: {len(page.body)}")
        lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        connection.writer.write(head + page.body)
        await asyncio.wait_for(connection.writer.drain(), WRITE_DEADLINE_S)
        if not keep_alive:
            await self._linger(connection)
            connection.writer.close()

    async def _linger(self, connection: _Connection) -> None:
        """Before closing: say no more comes, and read what the client still sends (a body,
        the rest of a head too large) for a moment, so that closing with it unread does not
        reset the connection before the client reads the answer. Bounded in bytes and time."""
        writer = connection.writer
        reader = connection.reader
        if reader is None or not writer.can_write_eof():
            return
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            writer.write_eof()
            deadline = time.monotonic() + LINGER_S
            left = LINGER_BYTES
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                chunk = await asyncio.wait_for(reader.read(min(left, 65536)), wait)
                if not chunk:
                    return
                left -= len(chunk)


async def _rest_of_head(first: bytes, reader: asyncio.StreamReader) -> bytes | None:
    """The head after its first byte: a request line of at most ``MAX_REQUEST_LINE`` bytes
    (else 414), then header lines up to an empty one (at most ``MAX_HEADERS`` and
    ``MAX_HEAD_BYTES`` in all, else 431)."""
    try:
        head = first + await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise _BadRequest("414 URI Too Long", "request line too long") from None
    except asyncio.IncompleteReadError:
        return None
    if len(head) > MAX_REQUEST_LINE:
        raise _BadRequest("414 URI Too Long", f"request line over {MAX_REQUEST_LINE} bytes")
    too_large = _BadRequest(
        "431 Request Header Fields Too Large",
        f"head over {MAX_HEAD_BYTES} bytes or {MAX_HEADERS} header lines",
    )
    lines = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise too_large from None
        except asyncio.IncompleteReadError:
            return None
        head += line
        if line == b"\r\n":
            return head
        lines += 1
        if len(head) > MAX_HEAD_BYTES or lines > MAX_HEADERS:
            raise too_large


@frozen
class _Request:
    method: str
    target: str
    headers: dict[str, str]
    keep_alive: bool
    has_body: bool


def _parse(head: bytes) -> _Request:
    lines = head[:-4].split(b"\r\n")
    if len(lines) - 1 > MAX_HEADERS:
        raise _BadRequest("431 Request Header Fields Too Large", "too many header lines")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _BadRequest("400 Bad Request", "malformed request line") from None
    if version not in ("HTTP/1.0", "HTTP/1.1") or not method.isalpha() or not target:
        raise _BadRequest("400 Bad Request", "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise _BadRequest("400 Bad Request", "malformed header line")
        headers[name.decode("latin-1").lower()] = value.strip().decode("latin-1")
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
    has_body = "transfer-encoding" in headers or headers.get("content-length", "0") != "0"
    return _Request(method, target, headers, keep_alive, has_body)


_HEADER_VALUE = re.compile(r"[ -~]*")


def _page_query(query: str) -> str:
    """What of a query string the page depends on: its ``name[]`` values (prometheus_client
    reads no other), each once, sorted. Any other made a page of its own, built afresh: a
    client adding ``?x=1``, ``?x=2``... to each request had the whole page built for each
    (26 times a cached answer's CPU), the cache of a flood defeated."""
    names = urllib.parse.parse_qs(query).get("name[]")
    return urllib.parse.urlencode([("name[]", name) for name in sorted(set(names or ()))])


def _content_type(accept: str | None) -> str | None:
    """The page's Content-Type for the client's ``Accept``, as prometheus_client chooses it;
    ``None`` for one it cannot read (a version it compares with numbers: TypeError) or whose
    answer would not be a header of printable ASCII (it writes the version given back: a bare
    newline in it was a header line of the client's)."""
    try:
        chosen = choose_encoder(accept or "")[1]
    except (TypeError, ValueError):
        return None
    return chosen if _HEADER_VALUE.fullmatch(chosen) else None


def _error_page(status: str, detail: str) -> Page:
    return Page(status, (("Content-Type", "text/plain; charset=utf-8"),), f"{detail}\n".encode())


def _method_not_allowed(method: str) -> Page:
    return Page(
        "405 Method Not Allowed",
        (("Allow", "OPTIONS,GET"), ("Content-Type", "text/plain; charset=utf-8")),
        f"# HTTP 405 Method Not Allowed: {method[:32]}; use OPTIONS or GET\n".encode(),
    )


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A client that breaks off (a reset, a failed TLS handshake) is not news; anything
    else goes to asyncio's usual report."""
    error = context.get("exception")
    if isinstance(error, (OSError, ssl.SSLError, asyncio.TimeoutError, EOFError)):
        return
    loop.default_exception_handler(context)
