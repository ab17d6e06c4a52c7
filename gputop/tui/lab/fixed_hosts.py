"""A lab on simulated hosts with a frozen clock, for screenshots and tests.

``FixedHosts`` is a host source (``statuses()``) whose hosts a caller sets: the dashboard
reads it as it reads a live ``Lab``, so layout and keys are checked without ssh, and the
pictures show the very same screens the tests approve.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from gputop.core import settings
from gputop.core.history.card_history import CardHistory
from gputop.core.remote.lab_history import HistoryAsk
from gputop.core.remote.status import HostStatus, LinkState, Mode
from gputop.core.remote.transport import Failure
from gputop.core.sampling.source import open_backend

LAB_SCENARIOS = ("v100x4", "dgx-h100", "mixed", "demo")
FROZEN_AT_S = "30"


class FixedHosts:
    def __init__(self, statuses: Sequence[HostStatus]) -> None:
        self._lock = threading.Lock()
        self._statuses = list(statuses)
        self.histories: dict[int, CardHistory] = {}
        """What ``H`` shows for a host, by position (none: the host says it has no store)."""

    def statuses(self) -> list[HostStatus]:
        with self._lock:
            return list(self._statuses)

    def set(self, position: int, status: HostStatus) -> None:
        with self._lock:
            self._statuses[position] = status

    def card_history(self, position: int, ask: HistoryAsk) -> CardHistory:
        with self._lock:
            found = self.histories.get(position)
        if found is not None:
            return found
        return ask.problem("No history store on this simulated host.")


def simulated_status(
    host: str, scenario: str, user: str = "alice", at_s: str = FROZEN_AT_S, **changes: Any
) -> HostStatus:
    backend = open_backend(scenario, environ={settings.FAKE_TIME.name: at_s})
    try:
        snapshot = backend.sample()
    finally:
        backend.close()
    fields: dict[str, Any] = {
        "host": host,
        "state": LinkState.LIVE,
        "mode": Mode.FULL,
        "snapshot": snapshot,
        "user": user,
        "jobs": [],
    }
    fields.update(changes)
    return HostStatus(**fields)


def lab_statuses(count: int) -> list[HostStatus]:
    """``count`` hosts: simulated scenarios in turn; the 3rd stale, the 4th unreachable,
    the 5th in reduced mode (where there are that many)."""
    statuses = []
    for position in range(count):
        name = f"gpu{position + 1:02d}"
        scenario = LAB_SCENARIOS[position % len(LAB_SCENARIOS)]
        if position == 3:
            statuses.append(
                HostStatus(
                    name,
                    LinkState.UNREACHABLE,
                    failure=Failure(
                        "host-key", "its host key is not known yet", f"run `ssh {name}` once"
                    ),
                )
            )
            continue
        changes: dict[str, Any] = {}
        if position == 2:
            changes = {"state": LinkState.STALE, "stale_for_s": 12.0}
        if position == 4:
            changes = {"mode": Mode.REDUCED, "user": None}
        statuses.append(simulated_status(name, scenario, **changes))
    return statuses
