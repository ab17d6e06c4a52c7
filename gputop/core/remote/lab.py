"""A set of hosts watched together: one link per host, started and stopped as one.

The CLI (``snapshot``/``pick``/``run --hosts``) and, later, the dashboard use this. Hosts
that cannot be named, reached or read each get their own status; none stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gputop.core.history.card_history import CardHistory
from gputop.core.remote.host_link import HostLink
from gputop.core.remote.hosts import HostEntry
from gputop.core.remote.lab_history import HistoryAsk, remote_card_history
from gputop.core.remote.local_link import LocalLink
from gputop.core.remote.status import HostStatus, LinkState
from gputop.core.remote.transport import Failure
from gputop.core.sampling.nvml_backend import NvmlBackend


class Link(Protocol):
    host: str

    def start(self) -> Any: ...

    def stop(self, timeout_s: float = 5.0) -> None: ...

    def status(self) -> HostStatus: ...

    def wait_for(self, condition: Callable[[HostStatus], bool], timeout_s: float) -> bool: ...


class BadNameLink:
    """A host name that is not an ssh destination: a fixed status, nothing to connect."""

    def __init__(self, entry: HostEntry) -> None:
        self.host = entry.name
        self._status = HostStatus(
            entry.name,
            LinkState.UNREACHABLE,
            failure=Failure("bad-name", entry.problem or "not a host name"),
        )

    def start(self) -> BadNameLink:
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        return None

    def status(self) -> HostStatus:
        return self._status

    def wait_for(self, condition: Callable[[HostStatus], bool], timeout_s: float) -> bool:
        return condition(self._status)


def settled(status: HostStatus) -> bool:
    """A first answer: data, or a failure to report."""
    return status.snapshot is not None or status.state is LinkState.UNREACHABLE


class Lab:
    def __init__(
        self,
        entries: Sequence[HostEntry],
        interval_s: float,
        open_local_backend: Callable[[], NvmlBackend],
        **link_options: Any,
    ) -> None:
        self.links: list[Link] = []
        for entry in entries:
            if entry.problem is not None:
                self.links.append(BadNameLink(entry))
            elif entry.local:
                self.links.append(LocalLink(entry.name, open_local_backend, interval_s))
            else:
                self.links.append(HostLink(entry.name, interval_s, **link_options))

    def __enter__(self) -> Lab:
        for link in self.links:
            link.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for link in self.links:
            link.stop()

    def statuses(self) -> list[HostStatus]:
        return [link.status() for link in self.links]

    def card_history(self, position: int, ask: HistoryAsk) -> CardHistory:
        """``ask`` of the host at ``position``, asked of its agent (waits up to
        ``ask.timeout_s``: call it from a worker thread). docs/lab.md."""
        link = self.links[position]
        return remote_card_history(link, link.status(), ask)

    def wait_all(self, condition: Callable[[HostStatus], bool], timeout_s: float) -> bool:
        """Wait until ``condition`` holds for every host; False when time ran out first."""
        deadline = time.monotonic() + timeout_s
        return all(
            link.wait_for(condition, max(0.0, deadline - time.monotonic())) for link in self.links
        )
