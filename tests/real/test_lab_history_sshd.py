"""``H`` on a lab host's card: its history, asked of the host's agent through a real sshd on
127.0.0.1 (tests/helpers/sshd.py) and answered from that host's own recorded store; and what
the screen says where a host cannot answer (docs/lab.md, docs/history.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.history import holders_scenario, record_stepped
from helpers.sshd import FULL_ALIASES, SshServer, start_server
from textual.pilot import Pilot
from textual.widgets import Static

from gputop.core.history.card_history import CardHistory
from gputop.core.history.series import BLOCKS
from gputop.core.remote.hosts import resolve_hosts
from gputop.core.remote.lab import Lab
from gputop.core.remote.status import LinkState
from gputop.core.remote.transport import SSH_CONFIG_ENV
from gputop.core.sampling.source import open_backend
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.remote_screens import RemoteCardHistoryScreen

WAIT_S = 40.0
HOSTS = "gpu-v100,gpu-dgx,gpu-reduced,gpu-hostile"
HOST_CLOCK_S = 1767225600 + 30
"""The hosts' simulated clock: GPUTOP_FAKE_TIME=30 after 2026-01-01 00:00 UTC."""


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    server: SshServer = start_server(tmp_path)
    monkeypatch.setenv(SSH_CONFIG_ENV, str(server.ssh_config))
    # gpu-v100 has a recorder's store: the hour before its clock, with known holders
    scenario = Path(holders_scenario(tmp_path / "holders.json"))
    document = json.loads(scenario.read_text())
    document["start_time"] = HOST_CLOCK_S - 30 - 3600
    # recorded for the host's own cards: H finds a card's history by its UUID
    host_cards = open_backend(FULL_ALIASES["gpu-v100"])
    try:
        uuids = [gpu.uuid for gpu in host_cards.sample().gpus]
    finally:
        host_cards.close()
    for gpu, uuid in zip(document["gpus"], uuids, strict=False):
        gpu["uuid"] = uuid
    scenario.write_text(json.dumps(document))
    record_stepped(str(scenario), server.state_dir("gpu-v100") / "history.sqlite3", 720)
    opened = Lab(
        resolve_hosts(HOSTS, {}),
        0.5,
        lambda: open_backend("demo", environ={"GPUTOP_FAKE_TIME": "30"}),
        first_retry_s=0.2,
        max_retry_s=1.0,
    )
    with opened:
        yield opened
    server.kill()


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            app = pilot.app
            statuses = getattr(app, "statuses", [])
            seen = [
                (s.host, s.state.value, s.failure, s.stale_for_s, s.snapshots_received)
                for s in statuses
            ]
            raise AssertionError(f"not within {WAIT_S} s: {what}; the hosts: {seen}")
        await pilot.pause(0.1)


def body(app: LabApp) -> str:
    return str(app.screen.query_one("#history-body", Static).render())


async def open_history(pilot: Pilot[None], app: LabApp, *keys: str) -> CardHistory:
    """Press ``keys`` then ``H``, wait for the host's answer, and return it."""
    await pilot.press(*keys, "H")
    await until(pilot, lambda: isinstance(app.screen, RemoteCardHistoryScreen), "the screen")
    screen = app.screen
    assert isinstance(screen, RemoteCardHistoryScreen)
    await until(pilot, lambda: screen.shown is not None, "the host's answer")
    assert isinstance(screen.shown, CardHistory)
    return screen.shown


async def test_h_on_a_remote_card_shows_the_hosts_recorded_history_and_why_others_cannot(
    lab: Lab,
) -> None:
    app = LabApp(lab, [link.host for link in lab.links], interval_s=0.5, user="alice")
    app.history_timeout_s = 3.0  # the stand-in agent never answers: do not wait long
    async with app.run_test(size=(160, 48)) as pilot:
        # Every host connected and heard from; on a loaded machine one may read stale for a
        # moment between two of its snapshots, which is no reason to wait for all four at once.
        await until(
            pilot,
            lambda: (
                len(app.statuses) == 4
                and all(
                    s.state in (LinkState.LIVE, LinkState.STALE) and s.snapshots_received > 0
                    for s in app.statuses
                )
            ),
            "every host connected",
        )
        # gpu-v100, card 1: bob's idle notebook, from the host's store through ssh
        shown = await open_history(pilot, app, "right")
        assert shown.problem is None and shown.physical_index == 1
        assert [row.key for row in shown.holders][:1] == ["bob"]
        assert abs(shown.holders[0].idle_held_seconds - 3600) <= 40
        assert shown.series is not None
        assert any(value is not None for value in shown.series.memory_used_bytes)
        text = body(app)
        title = str(app.screen.query_one("#history-title", Static).render())
        assert "gpu-v100  GPU 1: last hour" in title
        assert "! bob  held 1.0 h" in text or "! bob  held 59" in text
        assert any(block in text for block in BLOCKS[1:])  # the plots
        screen = app.screen
        assert isinstance(screen, RemoteCardHistoryScreen)
        screen.shown = None
        await pilot.press("2")  # the last 24 hours: asked again
        await until(pilot, lambda: screen.shown is not None, "the day's answer")
        assert "last 24 hours" in str(screen.query_one("#history-title", Static).render())
        await pilot.press("escape")

        # gpu-dgx: gputop there, but no recorder
        shown = await open_history(pilot, app, "g")
        assert shown.problem is not None and "start 'gputop record'" in shown.problem
        assert shown.problem.startswith("gpu-dgx: ")
        await pilot.press("escape")

        # gpu-reduced: only nvidia-smi there
        shown = await open_history(pilot, app, "g")
        assert shown.problem is not None
        assert "gpu-reduced runs in reduced mode" in shown.problem
        assert "gputop hosts install gpu-reduced" in shown.problem
        await pilot.press("escape")

        # gpu-hostile: an agent that never answers (as one older than history requests)
        shown = await open_history(pilot, app, "g")
        assert shown.problem is not None
        assert "No answer from gputop on gpu-hostile in 3 s" in shown.problem
        assert "update it: gputop hosts install gpu-hostile" in shown.problem
        assert "\x1b" not in body(app)
        await pilot.press("escape")
