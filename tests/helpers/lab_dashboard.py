"""Build the lab dashboard on fixed simulated hosts, for Pilot and snapshot tests."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import App
from textual.pilot import Pilot

from gputop.core.remote.status import HostStatus
from gputop.tui.lab.fixed_hosts import FixedHosts, lab_statuses
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.lab_grid import HostCards
from helpers.waiting import pilot_wait_for

WAIT_S = 30.0


def make_lab_app(statuses: Sequence[HostStatus] | None = None, count: int = 5) -> LabApp:
    statuses = list(statuses) if statuses is not None else lab_statuses(count)
    return LabApp(FixedHosts(statuses), [s.host for s in statuses], user="alice")


async def first_lab_sample(pilot: Pilot[None]) -> None:
    """Wait until every host's status has been drawn once."""
    await pilot_wait_for(
        pilot, lambda: bool(getattr(pilot.app, "statuses", None)), "a lab sample", WAIT_S
    )
    await pilot.pause()


def lab_cards(app: App[None]) -> list[tuple[HostCards, int]]:
    """Each card the lab shows: its host's cards and its physical index."""
    return [(cards, index) for cards in app.query(HostCards) for index in cards.cards]
