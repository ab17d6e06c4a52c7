"""Repainting only what changed must look exactly like repainting everything.

The process table paints its rows itself (DataTable re-renders every cell of a row through
Rich) and GPU cards repaint only their changed lines; these tests hold both to what Textual
would have drawn.
"""

from __future__ import annotations

import pytest
from dashboard_helpers import make_app
from textual.geometry import Region
from textual.selection import Selection
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import DataTable

from gputop.core.model import Snapshot
from gputop.tui.app import GputopApp
from gputop.tui.widgets.gpu_card import GpuCard
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)
SMALL = (80, 24)


def assert_rows_painted_like_datatable(table: ProcessTable) -> None:
    for y in range(table.size.height):
        ours = table.render_line(y)
        datatable = DataTable.render_line(table, y)
        assert list(ours) == list(datatable), f"line {y} differs"


@pytest.mark.parametrize("scenario", ["dgx-h100", "mig", "faulty", "demo"])
async def test_process_rows_are_painted_as_datatable_would(scenario: str) -> None:
    app = make_app(scenario)
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        assert_rows_painted_like_datatable(app.query_one(ProcessTable))


async def test_the_cursor_row_is_painted_as_datatable_would_focused_or_not() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        table = app.query_one(ProcessTable)
        await pilot.press("tab", "down", "down")
        assert table.has_focus and table.cursor_row == 2
        assert_rows_painted_like_datatable(table)
        await pilot.press("tab")
        assert not table.has_focus
        assert_rows_painted_like_datatable(table)


async def test_a_hovered_and_scrolled_table_is_painted_as_datatable_would() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        table = app.query_one(ProcessTable)
        await pilot.hover(ProcessTable, offset=(5, 4))
        table.scroll_to(x=7, y=11, animate=False)
        await pilot.pause()
        assert table.scroll_offset == (7, 11)
        assert_rows_painted_like_datatable(table)


async def test_changed_cells_repaint_only_themselves() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        table = app.query_one(ProcessTable)
        repainted: list[tuple[Region, ...]] = []
        original = table.refresh

        def spy(*regions: Region, **options: object) -> ProcessTable:
            if not table._repaint_later:  # update_cell's own refresh is held back
                repainted.append(regions)
            return original(*regions, **options)  # type: ignore[arg-type]

        table.refresh = spy  # type: ignore[method-assign]
        table.show(_a_second_later(app))
        await pilot.pause()
        assert repainted and all(regions for regions in repainted)
        assert all(region.height == 1 for regions in repainted for region in regions)
        assert_rows_painted_like_datatable(table)


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
