"""The HTTP(S) server of ``/metrics``: gputop's bounded server over prometheus_client's app.

The registry holds the snapshot collector and prometheus_client's process collector
(``process_cpu_seconds_total`` and the like: what the exporter itself costs), not the
library's global registry. prometheus_client's WSGI app writes each page; the connections,
deadlines and threads are http_server.py's, which a local user cannot starve
(docs/exporter.md, "Serving under a flood").
"""

from __future__ import annotations

import contextlib
import errno
import ssl
from collections.abc import Iterator

from prometheus_client import ProcessCollector, make_wsgi_app

from gputop.core.errors import GputopError
from gputop.core.exporter.collector import SnapshotCollector
from gputop.core.exporter.http_server import BoundedServer
from gputop.core.exporter.listen import ListenAddress
from gputop.core.exporter.registry import MetricsRegistry
from gputop.core.private_files import regular_file_path


class ServeError(GputopError):
    """The exporter could not listen (the port is taken, a certificate is unreadable)."""


@contextlib.contextmanager
def serve(
    collector: SnapshotCollector,
    address: ListenAddress,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> Iterator[int]:
    """Serve ``collector`` on ``address`` while the block runs; gives the port it got."""
    registry = MetricsRegistry(auto_describe=False)  # ?name[]= works (registry.py)
    registry.register(collector)
    registry.register(ProcessCollector(registry=None))
    where = f"{address.host}:{address.port}"
    context: ssl.SSLContext | None = None
    if certfile and keyfile:
        context = _tls_context(certfile, keyfile, where)
    server = BoundedServer(
        make_wsgi_app(registry),
        lambda: collector.generation,
        address.host,
        address.port,
        context,
    )
    try:
        port = server.start()
    except OSError as error:
        raise ServeError(
            f"Cannot serve metrics on {where}: {error.strerror or error}. "
            + (
                "Another program holds the port: give another with --listen HOST:PORT."
                if error.errno == errno.EADDRINUSE
                else "Check --listen, --tls-cert and --tls-key."
            )
        ) from None
    try:
        yield port
    finally:
        server.stop()


def _tls_context(certfile: str, keyfile: str, where: str) -> ssl.SSLContext:
    """The context serving with the certificate and key the user named, each checked to be
    a regular file first: OpenSSL would wait on a FIFO for ever."""
    with contextlib.ExitStack() as files:
        paths = []
        for option, path in (("--tls-cert", certfile), ("--tls-key", keyfile)):
            try:
                paths.append(files.enter_context(regular_file_path(path)))
            except OSError as error:
                raise ServeError(
                    f"Cannot serve metrics on {where}: {option} {path!r}: "
                    f"{error.strerror or error}."
                ) from None
        try:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile=paths[0], keyfile=paths[1])
        except OSError as error:  # ssl.SSLError is one
            raise ServeError(
                f"Cannot serve metrics on {where}: cannot load --tls-cert {certfile!r} with "
                f"--tls-key {keyfile!r}: {error.strerror or error}."
            ) from None
    return context
