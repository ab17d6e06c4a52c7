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

from gputop.core.errors import GputopError, UsageError
from gputop.core.exporter.collector import SnapshotCollector
from gputop.core.exporter.http_server import BoundedServer
from gputop.core.exporter.listen import ListenAddress
from gputop.core.exporter.registry import MetricsRegistry
from gputop.core.private_files import regular_file_path


class ServeError(GputopError):
    """The exporter could not listen (the port is taken, an address not this machine's)."""


MAX_TLS_FILE_BYTES = 4 << 20
"""A certificate chain or key past this is no certificate chain or key (as a CA file)."""


@contextlib.contextmanager
def serve(
    collector: SnapshotCollector,
    address: ListenAddress,
    tls: ssl.SSLContext | None = None,
) -> Iterator[int]:
    """Serve ``collector`` on ``address`` while the block runs, over HTTPS with ``tls``
    (``tls_context``); gives the port it got."""
    registry = MetricsRegistry(auto_describe=False)  # ?name[]= works (registry.py)
    registry.register(collector)
    registry.register(ProcessCollector(registry=None))
    where = f"{address.host}:{address.port}"
    server = BoundedServer(
        make_wsgi_app(registry),
        lambda: collector.generation,
        address.host,
        address.port,
        tls,
    )
    try:
        port = server.start()
    except OSError as error:
        raise ServeError(
            f"Cannot serve metrics on {where}: {error.strerror or error}. "
            + (
                "Another program holds the port: give another with --listen HOST:PORT."
                if error.errno == errno.EADDRINUSE
                else "Check --listen."
            )
        ) from None
    try:
        yield port
    finally:
        server.stop()


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """The context serving with the certificate and key the user named; a file that is
    missing, no regular file (OpenSSL would wait on a FIFO for ever) or no PEM certificate
    or key, a key that is not the certificate's, or an encrypted key (whose passphrase
    OpenSSL would ask on the terminal), is a ``UsageError`` naming it."""
    wanted = (
        ("--tls-cert", certfile, "certificate", b"-----BEGIN CERTIFICATE-----"),
        ("--tls-key", keyfile, "private key", b"PRIVATE KEY-----"),
    )
    with contextlib.ExitStack() as files:
        paths = []
        for option, path, _what, _marker in wanted:  # both opened first: neither a FIFO
            try:
                paths.append(files.enter_context(regular_file_path(path)))
            except OSError as error:
                raise UsageError(f"{option} {path!r}: {error.strerror or error}.") from None
        for opened, (option, path, what, marker) in zip(paths, wanted, strict=True):
            try:
                with open(opened, "rb") as file:
                    data = file.read(MAX_TLS_FILE_BYTES + 1)
            except OSError as error:  # EISDIR is refused above; an I/O error
                raise UsageError(f"{option} {path!r}: {error.strerror or error}.") from None
            if len(data) > MAX_TLS_FILE_BYTES:
                raise UsageError(f"{option} {path!r}: larger than 4 MiB, far more than a {what}.")
            if marker not in data:
                raise UsageError(f"{option} {path!r}: no PEM {what} in it.")
        asked: list[bool] = []

        def no_passphrase() -> bytes:  # OpenSSL's own would ask it on the terminal, and wait
            asked.append(True)
            return b""

        try:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile=paths[0], keyfile=paths[1], password=no_passphrase)
        except OSError as error:  # ssl.SSLError is one
            if asked:
                raise UsageError(
                    f"--tls-key {keyfile!r}: the key is encrypted, and the exporter asks no "
                    "passphrase (it runs unattended): give a key without one (openssl pkey "
                    "-in KEY -out PLAIN, kept 0600)."
                ) from None
            reason = getattr(error, "reason", None) or error.strerror or error
            raise UsageError(
                f"--tls-cert {certfile!r} with --tls-key {keyfile!r}: cannot serve with them "
                f"({reason})."
            ) from None
    return context
