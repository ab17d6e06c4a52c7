"""``e`` on a card: its health on a screen of its own (issue 42). Every counter, the Xids with
their time, meaning and action, newest first; an Xid that arrives while it is open shows;
escape closes it; at 80 columns an Xid's meaning wraps in its own column. docs/health.md."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from helpers.dashboard import first_sample
from helpers.scenarios import minimal_gpu
from helpers.waiting import pilot_wait_for
from rich.console import Console

from gputop.core.model import GpuHealth, XidEvent
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.keys import KEY_HELP
from gputop.tui.screens.health import HealthScreen, render_health_screen
from gputop.tui.screenshots import SCREENSHOT_USER

TIME_COLUMN = len("01-01 00:00:30  ")


def dashboard(path: Path) -> GputopApp:
    gpus = [
        minimal_gpu(
            ecc_uncorrected_volatile=0,
            remapped_rows={"correctable": 1, "uncorrectable": 0, "pending": True},
        ),
        minimal_gpu(uuid="GPU-22222222-aaaa-bbbb-cccc-000000000000", pci_bus_id="00000000:08:00.0"),
    ]
    path.write_text(json.dumps({"description": "health", "gpus": gpus}), encoding="utf-8")
    backend = open_backend(str(path), environ={"GPUTOP_FAKE_TIME": "30"})
    return GputopApp(backend, interval_s=0.2, probes=False, user=SCREENSHOT_USER, environ={})


def shown(app: Any) -> str:
    """What the open screen draws, as text."""
    return "\n".join(lines_at(app.screen.health, 100))


async def test_e_opens_the_highlighted_cards_health_and_escape_closes_it(tmp_path: Path) -> None:
    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(120, 40)) as pilot:
        await first_sample(pilot)
        await pilot.press("e")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "the screen")
        text = shown(app)
        assert "verdict  warning" in text
        assert "⚠ row remap pending: Reset the GPU when it is idle." in text
        assert "remapped rows" in text and "1 correctable, 0 uncorrectable, pending yes" in text
        assert "retired pages      not on this card" in text
        assert "none since gputop started (from nvml events)" in text
        app.backend.nvml.inject_xid(0, 79)  # while it is open: the next sample shows it
        await pilot_wait_for(pilot, lambda: "Xid 79 fell off the bus" in shown(app), "the Xid")
        text = shown(app)
        assert "verdict  critical" in text
        assert "→ Reboot the node" in text  # the action, as a sentence of its own
        await pilot.press("escape")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, HealthScreen), "closed")


async def test_e_on_another_card_shows_that_card(tmp_path: Path) -> None:
    app = dashboard(tmp_path / "health.json")
    async with app.run_test(size=(120, 40)) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "e")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "the screen")
        text = shown(app)
    assert "verdict  ok" in text and "row remap" not in text


def test_the_help_lists_e() -> None:
    keys = [keys for _, rows in KEY_HELP for keys, _ in rows]
    assert "e" in keys


def lines_at(health: GpuHealth, width: int) -> list[str]:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(render_health_screen(health))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined,no-any-return]


def test_at_80_columns_an_xids_lines_stay_beside_its_time() -> None:
    """Inside the 80x24 window (76 columns): each Xid's meaning and action wrap in their own
    column, newest first, never under the times."""
    health = GpuHealth(
        xid_events=(XidEvent(13, 1_767_225_600.0, count=40), XidEvent(79, 1_767_225_660.0)),
        xid_sources=("nvml events",),
        xid_counts=((13, 40), (79, 1)),
    )
    lines = lines_at(health, 76)
    start = next(i for i, line in enumerate(lines) if line.startswith("Xids"))
    block = lines[start + 1 :]
    assert "Xid 79 fell off the bus" in block[0] and "Xid 13" not in block[0]
    assert any("Xid 13 graphics engine exception (40x)" in line for line in block)
    assert len(block) > 4  # meanings wrapped
    for line in block:
        assert len(line) <= 76
        assert line[:2].isdigit() or line[:TIME_COLUMN].strip() == "", line


def test_no_xid_source_is_said_not_shown_as_none() -> None:
    text = "\n".join(lines_at(GpuHealth(xid_events=None), 100))
    assert "unknown: neither NVML's events nor the kernel log is open to you" in text
    assert "none since" not in text


def test_the_faulty_p100s_health_at_80x24_looks_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """``--fake faulty``: ``e`` on its P100 (retired pages pending, Xid 63) at 80x24."""
    from textual.pilot import Pilot

    from gputop.tui.screenshots import SIZES, build_app

    async def open_health(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.press("right", "e")
        await pilot_wait_for(pilot, lambda: isinstance(pilot.app.screen, HealthScreen), "opened")
        await pilot.pause()

    assert snap_compare(
        build_app("faulty", interval_s=3600.0), terminal_size=SIZES["80x24"], run_before=open_health
    )


async def test_the_lab_shows_a_hosts_card_health() -> None:
    from helpers.lab_dashboard import lab_cards

    from gputop.tui.lab.fixed_hosts import FixedHosts, simulated_status
    from gputop.tui.lab.lab_app import LabApp

    app = LabApp(FixedHosts([simulated_status("gpu02", "faulty")]), ["gpu02"], user="alice")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait_for(pilot, lambda: len(lab_cards(app)) == 3, "the host's cards")
        await pilot.press("right", "e")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "the screen")
        text = shown(app)
    assert "retired pages pending" in text and "Xid 63 memory repair recorded" in text
