"""The HTTP(S) server of ``/metrics``: prometheus_client's own, over gputop's collector only.

The registry holds the snapshot collector and prometheus_client's process collector
(``process_cpu_seconds_total`` and the like: what the exporter itself costs), not the
library's global registry. TLS is prometheus_client's (``certfile``/``keyfile``).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from prometheus_client import ProcessCollector, start_http_server

from gputop.core.errors import GputopError
from gputop.core.exporter.collector import SnapshotCollector
from gputop.core.exporter.listen import ListenAddress
from gputop.core.exporter.registry import MetricsRegistry


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
    try:
        server, thread = start_http_server(
            address.port, address.host, registry, certfile=certfile, keyfile=keyfile
        )
    except OSError as error:
        where = f"{address.host}:{address.port}"
        raise ServeError(
            f"Cannot serve metrics on {where}: {error.strerror or error}. "
            + (
                "Another program holds the port: give another with --listen HOST:PORT."
                if error.errno == errno.EADDRINUSE
                else "Check --listen, --tls-cert and --tls-key."
            )
        ) from None
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
