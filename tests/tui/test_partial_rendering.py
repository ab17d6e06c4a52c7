"""Repainting only what changed must look exactly like repainting everything.

GPU cards repaint only their changed lines; these tests hold them to what Textual would
have drawn for the whole card. (The process table's own tests are in test_process_table.py.)
"""

from __future__ import annotations

import pytest
from helpers.dashboard import make_app
from textual.geometry import Region
from textual.selection import Selection
from textual.strip import Strip
from textual.visual import Visual, visualize

from gputop.core.model import Snapshot
from gputop.tui.app import GputopApp
from gputop.tui.widgets.gpu_card import GpuCard
from gputop.tui.widgets.gpu_grid import GpuGrid

BIG = (160, 48)
SMALL = (80, 24)


def assert_card_lines_painted_like_the_whole_card(card: GpuCard) -> None:
    width, height = card.size
    whole = Visual.to_strips(card, visualize(card, card.render()), width, height, card.visual_style)
    blank = Strip.blank(width, card.visual_style.rich_style)
    for y in range(height):
        expected = whole[y] if y < len(whole) else blank
        assert list(card.render_line(y)) == list(expected), f"{card.id} line {y} differs"


@pytest.mark.parametrize("scenario", ["dgx-h100", "mig", "faulty", "demo"])
@pytest.mark.parametrize("size", [BIG, SMALL])
async def test_card_lines_are_painted_as_the_whole_card_would(
    scenario: str, size: tuple[int, int]
) -> None:
    app = make_app(scenario)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("space", "right")  # one selected card, another highlighted
        await pilot.pause()
        for _ in range(3):  # later lines are made from the shapes of earlier ones
            for card in app.query(GpuCard):
                assert_card_lines_painted_like_the_whole_card(card)
            snapshot = _a_second_later(app)
            app.history.add(snapshot)
            app.query_one(GpuGrid).show(snapshot, app.history, compact=app.compact)
            await pilot.pause()


async def test_text_selected_in_a_card_is_shown() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        card = app.query_one("#gpu-2", GpuCard)
        plain = list(card.render_line(1))
        app.screen.selections = {card: Selection(None, None)}  # all of it
        await pilot.pause()
        assert list(card.render_line(1)) != plain
        assert_card_lines_painted_like_the_whole_card(card)


async def test_a_card_repaints_only_its_changed_lines() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        card = app.query_one("#gpu-3", GpuCard)
        refreshed: list[tuple[Region, ...]] = []
        original = card.refresh

        def spy(*regions: Region, **options: object) -> GpuCard:
            refreshed.append(regions)
            return original(*regions, **options)  # type: ignore[arg-type]

        card.refresh = spy  # type: ignore[method-assign]
        snapshot = _a_second_later(app)
        app.history.add(snapshot)
        app.query_one(GpuGrid).show(snapshot, app.history, compact=False)
        await pilot.pause()
        lines = [region.y for regions in refreshed for region in regions]
        assert refreshed and all(regions for regions in refreshed)
        assert lines and 0 not in lines  # the name line stays
        assert_card_lines_painted_like_the_whole_card(card)


def _a_second_later(app: GputopApp) -> Snapshot:
    nvml = app.backend.nvml
    nvml.set_time(nvml.now() + 1.0)
    return app.backend.sample()
