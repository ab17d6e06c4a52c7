"""Repainting only what changed must look exactly like repainting everything.

The grid draws every GPU card itself and repaints only the screen lines whose cards' lines
changed; these tests hold it to what Textual would have drawn for a card's whole text, and to
what a paint from nothing draws. (The process table's own tests are in
test_process_table.py.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.dashboard import first_sample, make_app, spy_on_refresh
from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

from gputop.core.model import Snapshot
from gputop.tui.app import GputopApp
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)
SMALL = (80, 24)


def assert_card_lines_painted_like_the_whole_card(grid: GpuGrid, index: int) -> None:
    """The text inside the card's border is Textual's rendering of the card's whole text."""
    state = grid.card_state(index)
    if state.compact and state.highlighted:
        return  # its own background: held to a paint from nothing below
    inset, top = (1, 0) if state.compact else (2, 1)
    width = grid.card_region(index).width - 2 * inset
    content = grid.card_content(index)
    whole = Visual.to_strips(
        grid, visualize(grid, Text("\n").join(content)), width, len(content), grid.visual_style
    )
    rows = grid.card_strips(index)
    for line, expected in enumerate(whole):
        drawn = rows[top + line].crop(inset, inset + expected.cell_length)
        assert _cells(drawn) == _cells(expected), f"GPU {index} line {line} differs"


def _cell_by_cell(strip: Strip) -> list[tuple[str, Style | None]]:
    """What each cell of a strip shows (the right half of a wide character: "")."""
    cells: list[tuple[str, Style | None]] = []
    for text, style in _cells(strip):
        for char in text:
            cells.append((char, style))
            cells.extend([("", style)] * (cell_len(char) - 1))
    return cells


def _cells(strip: Strip) -> list[tuple[str, Style | None]]:
    """What a strip shows: text and styles less the offsets a text selection reads (the
    grid offers none)."""
    return [(s.text, s.style.clear_meta_and_links() if s.style else None) for s in strip]


def assert_painted_as_from_nothing(grid: GpuGrid) -> None:
    """Every line from the caches is the line a paint from nothing draws."""
    height = grid.size.height
    cached = grid.render_lines(Region(0, 0, grid.size.width, height))
    grid.repaint_all()
    fresh = grid.render_lines(Region(0, 0, grid.size.width, height))
    for y, (old, new) in enumerate(zip(cached, fresh, strict=True)):
        assert list(old) == list(new), f"line {y} differs"


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
        grid = app.query_one(GpuGrid)
        for _ in range(3):  # later lines are made from the shapes of earlier ones
            for index in grid.cards:
                assert_card_lines_painted_like_the_whole_card(grid, index)
            assert_painted_as_from_nothing(grid)
            snapshot = _a_second_later(app)
            app.history.add(snapshot)
            grid.show(snapshot, app.history, compact=app.compact)
            await pilot.pause()


async def test_text_is_not_selectable_across_the_cards() -> None:
    """One widget draws every card: a selection would run across cards, so none is offered
    (a card widget's selection was, before the grid drew them)."""
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        assert not app.query_one(GpuGrid).allow_select


async def test_a_card_repaints_only_its_changed_lines() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
        grid = app.query_one(GpuGrid)
        card = grid.card_region(3).translate(-grid.content_region.offset)
        refreshed = spy_on_refresh(grid)
        snapshot = _a_second_later(app)
        app.history.add(snapshot)
        changed = _cells_changed_by(
            grid, grid.size.height, lambda: grid.show(snapshot, app.history, compact=False)
        )
        await pilot.pause()
        assert refreshed and all(regions for regions in refreshed)
        regions = [region for regions in refreshed for region in regions]
        assert all(region.height == 1 for region in regions)  # lines, not cards
        lines = [region.y - card.y for region in regions if region == region.intersection(card)]
        assert lines and 1 not in lines  # the name line stays
        assert changed and all(any(r.contains(*cell) for r in regions) for cell in changed)
        assert all(region.width <= card.width for region in regions)
        whole_lines = len(regions) * card.width
        assert sum(region.area for region in regions) * 4 < whole_lines * 3  # not all of them
        assert_card_lines_painted_like_the_whole_card(grid, 3)
        refreshed.clear()
        grid.show(snapshot, app.history, compact=False)  # the same again: a steady screen
        await pilot.pause()
        assert refreshed == []


def _cells_changed_by(
    widget: Widget, height: int, change: Callable[[], None]
) -> set[tuple[int, int]]:
    """The cells (x, y) of ``widget``'s first ``height`` lines that ``change`` changed."""
    before = [_cell_by_cell(widget.render_line(y)) for y in range(height)]
    change()
    after = [_cell_by_cell(widget.render_line(y)) for y in range(height)]
    return {
        (x, y)
        for y in range(height)
        for x, (old, new) in enumerate(zip(before[y], after[y], strict=True))
        if old != new
    }


def _a_second_later(app: GputopApp) -> Snapshot:
    nvml = app.backend.nvml
    nvml.set_time(nvml.now() + 1.0)
    return app.backend.sample()


async def test_cards_shown_before_the_first_layout_are_in_the_first_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dashboard shows its first sample before Textual has laid the screen out (the
    sample is read while Textual starts): the first frame must draw the cards' lines, not
    leave them to a repaint after the layout (a frame later: the first frame's time, as the
    bench counts it, grew by that frame)."""
    from gputop.core.sampling.early import EarlySample

    frames: list[list[str]] = []
    render_lines = GpuGrid.render_lines

    def recorded(grid: GpuGrid, crop: Region) -> list[Strip]:
        strips = render_lines(grid, crop)
        frames.append(["".join(segment.text for segment in strip) for strip in strips])
        return strips

    monkeypatch.setattr(GpuGrid, "render_lines", recorded)
    app = make_app("dgx-h100")
    early = EarlySample.start(app.backend)
    early.wait()
    app._first_sample = early
    async with app.run_test(size=BIG) as pilot:
        await pilot.pause()
    first = next(lines for lines in frames if lines)
    assert sum(line.count(" MHz") for line in first) == 8, "\n".join(first)


async def test_a_theme_chosen_in_the_palette_redraws_the_cards_in_its_colours() -> None:
    """The cards' colours come from the theme: after a change every card is drawn in the
    new one, and as a paint from nothing would draw it (no line kept from the old theme)."""
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        grid = app.query_one(GpuGrid)

        def corner_colours() -> set[object]:
            return {
                segment.style.color
                for index in range(8)
                for segment in grid.card_strips(index)[0]
                if segment.text.startswith("╭") and segment.style
            }

        before = corner_colours()
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        after = corner_colours()
        assert before and after and before != after
        assert_painted_as_from_nothing(grid)


async def test_a_changed_process_row_repaints_its_line_of_the_table_only() -> None:
    """A row that changed marks its line as far as the table shows it: not the scroll bar,
    nor the PyTorch view beside it (whose lines the screen would then ask for too)."""
    app = make_app("dgx-h100")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        refreshed = spy_on_refresh(table)
        snapshot = _a_second_later(app)
        height = table.scrollable_content_region.height
        changed = _cells_changed_by(table, height, lambda: table.show(snapshot))
        regions = [region for regions in refreshed for region in regions]
        assert regions and all(region.height == 1 for region in regions)
        assert changed  # every reading moves (the scenario's clock)
        missed = {cell for cell in changed if not any(r.contains(*cell) for r in regions)}
        assert missed == set()  # every changed cell is written
        written = sum(region.area for region in regions)
        whole_lines = len({y for _, y in changed}) * table.scrollable_content_region.width
        assert written * 4 < whole_lines  # and little else: the changed columns' cells
        shown = table.scrollable_content_region
        beside = app.query_one("#torch").region
        for region in regions:
            on_screen = region.translate(table.content_region.offset)
            assert on_screen == on_screen.intersection(shown), region
            assert not on_screen.overlaps(beside)
