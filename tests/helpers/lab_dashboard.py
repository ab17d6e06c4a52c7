"""Build the lab dashboard on fixed simulated hosts, for Pilot and snapshot tests."""

from __future__ import annotations

import time
from collections.abc import Sequence

from textual.pilot import Pilot

from gputop.core.remote.status import HostStatus
from gputop.tui.lab.fixed_hosts import FixedHosts, lab_statuses
from gputop.tui.lab.lab_app import LabApp

WAIT_S = 30.0


def make_lab_app(statuses: Sequence[HostStatus] | None = None, count: int = 5) -> LabApp:
    statuses = list(statuses) if statuses is not None else lab_statuses(count)
    return LabApp(FixedHosts(statuses), [s.host for s in statuses], user="alice")


async def first_lab_sample(pilot: Pilot[None]) -> None:
    """Wait until every host's status has been drawn once."""
    deadline = time.monotonic() + WAIT_S
    while not getattr(pilot.app, "statuses", None):
        if time.monotonic() > deadline:
            raise AssertionError(f"no lab sample after {WAIT_S} s")
        await pilot.pause(0.05)
    await pilot.pause()
