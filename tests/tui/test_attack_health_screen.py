"""``e``'s health screen used as a hostile or a new user would: on ``--fake faulty`` in a
40x10 terminal and at 80x24, resized while open, an Xid storm arriving while it is open, and
``e`` with the process table focused. It opens, keeps up and closes; nothing raises."""

from __future__ import annotations

from helpers.dashboard import first_sample
from helpers.waiting import pilot_wait_for

from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.screens.health import HealthScreen
from gputop.tui.screenshots import SCREENSHOT_USER
from gputop.tui.widgets.process_table import ProcessTable


def faulty() -> GputopApp:
    backend = open_backend("faulty", environ={"GPUTOP_FAKE_TIME": "30"})
    return GputopApp(backend, interval_s=0.2, probes=False, user=SCREENSHOT_USER, environ={})


def xids_shown(app: GputopApp) -> int:
    health = app.screen.health if isinstance(app.screen, HealthScreen) else None
    return sum(e.count for e in (health.xid_events or ())) if health else 0


async def test_a_tiny_terminal_resized_while_open_and_an_xid_storm() -> None:
    app = faulty()
    async with app.run_test(size=(40, 10)) as pilot:
        await first_sample(pilot)
        await pilot.press("right", "e")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "the screen")
        before = xids_shown(app)
        for index in range(2000):  # alternating codes: none coalesces with the one before
            app.backend.nvml.inject_xid(1, 13 if index % 2 else 31)
        await pilot_wait_for(pilot, lambda: xids_shown(app) > before, "the storm shown")
        for size in ((80, 24), (20, 5), (200, 60), (40, 10)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
        assert isinstance(app.screen, HealthScreen)
        await pilot.press("escape")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, HealthScreen), "closed")
        await pilot.press("e")  # opens again on the same card after all that
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "again")


async def test_e_with_the_process_table_focused_opens_the_highlighted_card() -> None:
    app = faulty()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_sample(pilot)
        await pilot.press("tab")
        assert app.focused is app.query_one(ProcessTable)
        await pilot.press("e")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, HealthScreen), "the screen")
        await pilot.press("e")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, HealthScreen), "closed")
