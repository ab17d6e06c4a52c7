"""The health badge on a card (issue 42): a card that is not ok names its first reason in a
few words on its bottom border (and a mark on the compact line at 80x24), from the sample
an Xid arrives in; a healthy card shows nothing. docs/health.md."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from helpers.dashboard import first_sample
from helpers.scenarios import minimal_gpu
from helpers.waiting import pilot_wait_for
from rich.console import Console

from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.screenshots import SCREENSHOT_USER
from gputop.tui.widgets.gpu_grid import GpuGrid


def scenario(path: Path) -> str:
    gpus = [
        minimal_gpu(
            ecc_uncorrected_volatile=0,
            remapped_rows={"correctable": 1, "uncorrectable": 0, "pending": True},
        ),
        minimal_gpu(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"),
    ]
    path.write_text(json.dumps({"description": "health", "gpus": gpus}), encoding="utf-8")
    return str(path)


def dashboard(path: Path) -> GputopApp:
    backend = open_backend(scenario(path), environ={"GPUTOP_FAKE_TIME": "30"})
    return GputopApp(backend, interval_s=0.2, probes=False, user=SCREENSHOT_USER, environ={})


def subtitle(app: Any, index: int) -> str:
    return str(app.query_one(GpuGrid).subtitle(index) or "")


def compact(app: Any, index: int) -> str:
    return "\n".join(line.plain for line in app.query_one(GpuGrid).card_content(index))


async def test_a_pending_remap_and_an_xid_that_arrives_show_on_the_card(tmp_path: Path) -> None:
    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        assert "⚠ row remap pending: reset" in subtitle(app, 0)
        assert "⚠" not in subtitle(app, 1) and "✖" not in subtitle(app, 1)
        app.backend.nvml.inject_xid(1, 79)
        await pilot_wait_for(
            pilot, lambda: "✖ Xid 79 fell off the bus" in subtitle(app, 1), "the Xid's badge"
        )


async def test_the_compact_line_marks_a_card_that_is_not_ok(tmp_path: Path) -> None:
    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_sample(pilot)
        await pilot_wait_for(pilot, lambda: "⚠" in compact(app, 0), "the warning mark")
        assert "⚠" not in compact(app, 1) and "✖" not in compact(app, 1)


STORM_LINE = r"GPU 1: (?:(\d+)x )?Xid 13 graphics engine exception"


def notes(app: Any) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_xids_that_arrive_are_toasted_coalesced_and_counted(tmp_path: Path) -> None:
    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        assert notes(app) == []  # what the cards had at start is on their badges, not news
        app.backend.nvml.inject_xid(1, 13, count=500)
        app.backend.nvml.inject_xid(0, 79)

        def storm_told() -> int:
            told = re.findall(STORM_LINE, "\n".join(notes(app)))
            return sum(int(n or 1) for n in told)

        await pilot_wait_for(
            pilot, lambda: storm_told() == 500 and any("GPU 0: Xid 79 fell off the bus" in n
                                                        for n in notes(app)),
            "the storm and the Xid 79 told",
        )  # fmt: skip
        toasts = [n for n in app._notifications if "Xid" in str(n.message)]
        assert len(toasts) < 10  # coalesced: one a sample, not one an Xid
        assert any(n.severity == "error" for n in toasts if "Xid 79" in str(n.message))


async def test_the_lab_shows_a_hosts_card_badge_from_its_health() -> None:
    from helpers.lab_dashboard import lab_cards

    from gputop.tui.lab.fixed_hosts import FixedHosts, simulated_status
    from gputop.tui.lab.lab_app import LabApp

    app = LabApp(FixedHosts([simulated_status("gpu02", "faulty")]), ["gpu02"], user="alice")
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot_wait_for(pilot, lambda: len(lab_cards(app)) == 3, "the host's cards")
        await pilot.pause()
        subtitles = {i: str(cards.subtitle(i)) for cards, i in lab_cards(app)}
    assert "⚠ pages pending: reset (+1)" in subtitles[1]  # faulty's P100
    assert "⚠" not in subtitles[0] and "✖" not in subtitles[0]


async def test_h_on_a_card_shows_its_health_under_its_history(tmp_path: Path) -> None:
    from gputop.tui.screens.card_history import CardHistoryScreen

    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        app.backend.nvml.inject_xid(0, 13, count=3)
        await pilot_wait_for(
            pilot, lambda: "Xid 13" in subtitle(app, 0) or "(+1)" in subtitle(app, 0), "the Xid"
        )
        await pilot.press("H")
        await pilot_wait_for(
            pilot,
            lambda: isinstance(app.screen, CardHistoryScreen) and app.screen.shown,
            "the card's screen",
        )
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(app.screen.render_history(app.screen.shown))
        text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Health\nverdict  warning" in text
    assert "⚠ row remap pending: Reset the GPU when it is idle." in text
    assert "remapped rows      1 correctable, 0 uncorrectable, pending yes, failed no" in text
    assert "retired pages      not on this card" in text
    assert "Xid 13 graphics engine exception (3x)" in text
    assert "Restart the application" in text
