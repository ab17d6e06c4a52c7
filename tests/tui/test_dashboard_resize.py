"""A resize gives exactly the layout of a fresh start at the new size (issue 28, item 1).

The dashboard picks its layout (compact one-line cards below 100 columns or when the process
table would get too few rows) from the terminal's size. Started at 200x50 and resized to 80x24,
then back, it must show what a dashboard started at that size shows, cell for cell.
"""

from __future__ import annotations

import difflib
import html
import re
import time

import pytest
from helpers.dashboard import first_sample, make_app
from textual.pilot import Pilot

from gputop.tui.app import GputopApp

LARGE, SMALL = (200, 50), (80, 24)
SETTLE_TIMEOUT_S = 30.0
ONE_SAMPLE_S = 3600.0
"""Sample once: the utilisation history (sparklines) is then the same in every app."""


CELL_WIDTH, LINE_HEIGHT = 12.2, 24.4
"""Where Textual's SVG screenshots put a cell: its x and y are multiples of these."""
TEXT = re.compile(r'<text class="([^"]*)" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>')


def _normalised(svg: str) -> str:
    """The screen as rows of characters, each run with its style's class number.

    Class names are numbered in the order styles first appear, so two screens that show the
    same cells get the same numbers; trailing blanks (which Rich keeps or drops depending on
    how a wrapped text was last cut) are not part of the layout.
    """
    numbering: dict[str, int] = {}
    rows: dict[int, dict[int, tuple[str, int]]] = {}
    for classes, x, y, text in TEXT.findall(svg):
        style = numbering.setdefault(re.sub(r"terminal-\d+-", "", classes), len(numbering))
        column, row = round(float(x) / CELL_WIDTH), round(float(y) / LINE_HEIGHT)
        rows.setdefault(row, {})[column] = (html.unescape(text), style)
    lines = []
    for row in sorted(rows):
        runs = sorted(rows[row].items())
        cells: list[str] = []
        for column, (text, _) in runs:
            cells.extend(" " * (column - len(cells)))
            cells[column:] = list(text)
        line = "".join(cells)
        styles = [style for _, (text, style) in runs if text.strip()]
        lines.append(f"{line.rstrip()}  {styles}")
    return "\n".join(lines)


def _text(screen: str) -> list[str]:
    return screen.splitlines()


async def _settled(pilot: Pilot[None], app: GputopApp, size: tuple[int, int]) -> None:
    """The screen has the new size, and the layout made for it has been drawn."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while app.screen.size != size or app.query_one("#cards").size.width != size[0]:
        assert time.monotonic() < deadline, f"the screen never took the size {size}"
        await pilot.pause(0.02)
    await pilot.pause()


async def _fresh_screen(scenario: str, size: tuple[int, int]) -> str:
    app = make_app(scenario, interval_s=ONE_SAMPLE_S)
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        return await _stable_screenshot(pilot, app)


async def _stable_screenshot(pilot: Pilot[None], app: GputopApp) -> str:
    """A screenshot once two in a row agree (the selection reaches the PyTorch view after the
    first frame)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    before = _normalised(app.export_screenshot())
    while True:
        await pilot.pause(0.05)
        now = _normalised(app.export_screenshot())
        if now == before or time.monotonic() > deadline:
            return now
        before = now


async def _becomes(pilot: Pilot[None], app: GputopApp, expected: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while (shown := _normalised(app.export_screenshot())) != expected:
        if time.monotonic() > deadline:
            diff = "\n".join(difflib.unified_diff(_text(expected), _text(shown), lineterm=""))
            raise AssertionError(f"after the resize the screen differs from a fresh start:\n{diff}")
        await pilot.pause(0.05)


@pytest.mark.parametrize("scenario", ["demo", "dgx-h100", "faulty"])
async def test_resize_gives_the_layout_of_a_fresh_start(scenario: str) -> None:
    fresh_small = await _fresh_screen(scenario, SMALL)
    fresh_large = await _fresh_screen(scenario, LARGE)
    app = make_app(scenario, interval_s=ONE_SAMPLE_S)
    async with app.run_test(size=LARGE) as pilot:
        await first_sample(pilot)
        await _becomes(pilot, app, fresh_large)
        await pilot.resize_terminal(*SMALL)
        await _settled(pilot, app, SMALL)
        assert app.compact, "80x24 is the compact layout"
        await _becomes(pilot, app, fresh_small)
        await pilot.resize_terminal(*LARGE)
        await _settled(pilot, app, LARGE)
        assert not app.compact, "200x50 is the full layout"
        await _becomes(pilot, app, fresh_large)


async def test_a_resize_to_the_same_layout_keeps_it() -> None:
    """A resize that keeps the layout class (200x50 to 180x50) still redraws for its width."""
    app = make_app("demo", interval_s=ONE_SAMPLE_S)
    fresh = await _fresh_screen("demo", (180, 50))
    async with app.run_test(size=LARGE) as pilot:
        await first_sample(pilot)
        await pilot.resize_terminal(180, 50)
        await _settled(pilot, app, (180, 50))
        await _becomes(pilot, app, fresh)


async def test_the_dashboard_across_hosts_follows_a_resize_too() -> None:
    """``gputop --hosts`` has its own layout rule; a resize follows it the same way."""
    from helpers.lab_dashboard import first_lab_sample

    from gputop.tui.screenshots import build_lab_app

    async def fresh(size: tuple[int, int]) -> str:
        app = build_lab_app(5)
        async with app.run_test(size=size) as pilot:
            await first_lab_sample(pilot)
            return await _stable_screenshot(pilot, app)

    fresh_small, fresh_large = await fresh(SMALL), await fresh(LARGE)
    app = build_lab_app(5)
    async with app.run_test(size=LARGE) as pilot:
        await first_lab_sample(pilot)
        await pilot.resize_terminal(*SMALL)
        await _becomes(pilot, app, fresh_small)
        await pilot.resize_terminal(*LARGE)
        await _becomes(pilot, app, fresh_large)
