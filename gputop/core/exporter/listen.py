"""Where the exporter listens: loopback by default, any other address only when asked.

The metrics name users, commands and jobs: by default only this machine can read them
(``127.0.0.1:9401``). Serving them to the network takes an explicit ``--listen`` with
another address; docs/exporter.md shows an SSH tunnel and a reverse proxy instead.
"""

from __future__ import annotations

import ipaddress

from gputop.core.errors import UsageError
from gputop.core.numbers import parse_count
from gputop.core.records import frozen

DEFAULT_PORT = 9401
"""Beside dcgm-exporter's 9400, so both can run on one server."""
DEFAULT_HOST = "127.0.0.1"
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"


@frozen
class ListenAddress:
    host: str
    """An IP address literal (IPv6 without brackets)."""
    port: int
    """0 asks the kernel for a free port."""

    @property
    def is_loopback(self) -> bool:
        address = ipaddress.ip_address(self.host)
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
        return (mapped or address).is_loopback

    def url(self, port: int, scheme: str = "http") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{port}/metrics"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT`` (``[::1]:9401`` for IPv6, ``localhost`` for 127.0.0.1), or a
    ``UsageError`` that says what to write."""
    host, colon, port_text = text.rpartition(":")
    if not colon or not host:
        raise UsageError(
            f"--listen {text!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN} or [::1]:{DEFAULT_PORT}."
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        host = DEFAULT_HOST
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(
            f"--listen {text!r}: {host!r} is not an IP address; give one, such as "
            f"{DEFAULT_HOST} (this machine only) or 0.0.0.0 (every interface)."
        ) from None
    port = parse_count(port_text, "--listen port", 0, 65535)
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:  # [::ffff:127.0.0.1] is 127.0.0.1: listened on as IPv4 itself
        address = mapped
    return ListenAddress(str(address), port)
