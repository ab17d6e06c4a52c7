"""``l`` in the fleet dashboard on nodes whose Prometheus ``Hostname`` label is hostile (an ssh
option, shell words, a Cyrillic look-alike, 300 characters, empty), with an ssh config whose
patterns match them all: each gets the refusal, drawn as plain text; nothing is launched and
the dashboard keeps running."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.waiting import pilot_wait_for
from textual.widgets import DataTable, Static

from gputop.core.fleet.model import Fleet, build_fleet
from gputop.core.prometheus.client import Sample
from gputop.core.remote.transport import SSH_CONFIG_ENV
from gputop.tui.fleet.fleet_app import FleetApp
from gputop.tui.fleet.fleet_views import TextScreen

NOW = 1_800_000_000.0
HOSTS = ["-oProxyCommand=x", "a;b", "gрu1", "x" * 300, "[b]bold[/b]\x1b[2J", ""]


def fleet() -> Fleet:
    answers: dict[str, list[Sample]] = {"up": [], "scraped": [], "scrapes": [], "cards": []}
    for n, host in enumerate(HOSTS):
        target = {"job": "dcgm", "instance": f"10.0.0.{n}:9400"}
        answers["up"].append(Sample(target, NOW, 1.0))
        answers["scraped"].append(Sample(target, NOW, NOW - 2))
        answers["scrapes"].append(Sample(target, NOW, 9.0))
        labels = {**target, "gpu": "0", "UUID": f"GPU-{n}", "Hostname": host}
        for name, value in (
            ("DCGM_FI_DEV_FB_USED", 0.0),
            ("DCGM_FI_DEV_FB_FREE", 80000.0),
            ("DCGM_FI_DEV_GPU_UTIL", 0.0),
        ):
            answers["cards"].append(Sample({**labels, "__name__": name}, NOW, value))
    return build_fleet("http://prometheus:9090", NOW, answers, 4)


async def test_l_on_a_hostile_node_name_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host -* a* g* x* [*\n")  # names them all
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(SSH_CONFIG_ENV, raising=False)
    app = FleetApp(fleet, "http://prometheus:9090", None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_wait_for(pilot, lambda: app.fleet is not None, "the fleet", 10)
        await pilot.pause()
        table = app.query_one("#fleet-nodes", DataTable)
        assert table.row_count == len(HOSTS)
        for row in range(len(HOSTS)):
            table.move_cursor(row=row)
            await pilot.press("l")
            await pilot_wait_for(pilot, lambda: isinstance(app.screen, TextScreen), "advice")
            text = "".join(str(w.render()) for w in app.screen.query(Static))
            assert "not a plain host name" in text and "\x1b" not in text
            await pilot.press("escape")
            await pilot_wait_for(pilot, lambda: not isinstance(app.screen, TextScreen), "back")
        assert app.is_running
