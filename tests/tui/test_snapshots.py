"""What a person sees: each built-in scenario at a large and a small terminal size.

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs (or ``make screenshots``) before committing them.
"""

from __future__ import annotations

import pytest
from helpers.dashboard import first_sample
from helpers.lab_dashboard import first_lab_sample

from gputop.tui.screenshots import LAB_HOSTS, SCENARIOS, SIZES, build_app, build_lab_app


@pytest.mark.parametrize("label", sorted(SIZES))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dashboard_looks_as_approved(snap_compare, scenario: str, label: str) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(build_app(scenario), terminal_size=SIZES[label], run_before=first_sample)


def test_selection_and_launch_preview_look_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(
        build_app("mixed"),
        press=["right", "space", "right", "right", "space"],
        terminal_size=SIZES["160x48"],
        run_before=first_sample,
    )


@pytest.mark.parametrize("label", sorted(SIZES))
def test_lab_dashboard_looks_as_approved(snap_compare, label: str) -> None:  # type: ignore[no-untyped-def]
    """5 hosts at 160x48; 20 hosts at 80x24 (collapsed but the highlighted one)."""
    assert snap_compare(
        build_lab_app(LAB_HOSTS[label]), terminal_size=SIZES[label], run_before=first_lab_sample
    )


def test_lab_card_history_looks_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """``H`` on gpu01's card 1: the host's answer, plots and holders (a canned answer)."""
    from textual.pilot import Pilot

    from gputop.core.history.card_history import CardHistory
    from gputop.core.history.report import ReportRow
    from gputop.core.history.series import GpuSeries
    from gputop.tui.lab.remote_screens import RemoteCardHistoryScreen

    app = build_lab_app(LAB_HOSTS["160x48"])
    gib = 2**30
    utilization = tuple(None if i < 20 else float((i * 7) % 100) for i in range(120))
    memory = tuple(None if i < 20 else float(min(i, 90) * gib / 8) for i in range(120))
    app.source.histories[0] = CardHistory(
        1,
        0.0,
        3600.0,
        GpuSeries(1, None, utilization, memory, 16 * gib),
        (
            ReportRow("bob", 3000.0, 3000.0, 10 * gib, 10 * gib, 0.0),
            ReportRow("alice\x1b[2J", 2400.0, 0.0, 4 * gib, 5 * gib, 61.0),
        ),
    )

    async def open_history(pilot: Pilot[None]) -> None:
        await first_lab_sample(pilot)
        await pilot.press("right", "H")
        while not (isinstance(app.screen, RemoteCardHistoryScreen) and app.screen.shown):
            await pilot.pause(0.05)  # a condition: the worker's answer is drawn

    assert snap_compare(app, terminal_size=SIZES["160x48"], run_before=open_history)


def test_card_history_looks_as_approved(snap_compare, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``H`` on GPU 1 after a recorded hour (a real store): the plots, bob idle first."""
    from helpers.dashboard import make_app
    from helpers.history import holders_scenario, record_stepped
    from textual.pilot import Pilot

    from gputop.core.history.store import default_history_path
    from gputop.tui.screens.card_history import CardHistoryScreen

    scenario = holders_scenario(tmp_path / "holders.json")
    record_stepped(scenario, default_history_path(), samples=720)  # the hour to t=3600 s
    app = make_app(scenario, at_s="3600")

    async def open_history(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.press("right", "H")
        while not (isinstance(app.screen, CardHistoryScreen) and app.screen.shown):
            await pilot.pause(0.05)  # a condition: the worker's answer is drawn

    assert snap_compare(app, terminal_size=SIZES["160x48"], run_before=open_history)


RESIZES = {"200x50-to-80x24": [(200, 50), (80, 24)], "80x24-to-200x50": [(80, 24), (200, 50)]}


@pytest.mark.parametrize("label", sorted(RESIZES))
def test_dashboard_after_a_resize_looks_as_approved(snap_compare, label: str) -> None:  # type: ignore[no-untyped-def]
    """Started at one size, resized to the other: the layout of the new size (issue 28).

    tests/tui/test_dashboard_resize.py checks that each is exactly a fresh start's screen."""
    from textual.pilot import Pilot

    start, end = RESIZES[label]
    app = build_app("demo", interval_s=3600.0)

    async def resize(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.resize_terminal(*end)
        while app.screen.size != end or app.query_one("#cards").size.width != end[0]:
            await pilot.pause(0.02)  # a condition: the new size's layout is drawn
        await pilot.pause()

    assert snap_compare(app, terminal_size=start, run_before=resize)


def test_help_at_80x24_looks_as_approved(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """The help window fits an 80-column terminal, its right border included (issue 28)."""
    from textual.pilot import Pilot

    async def open_help(pilot: Pilot[None]) -> None:
        await first_sample(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(
        build_app("demo", interval_s=3600.0), terminal_size=SIZES["80x24"], run_before=open_help
    )
