"""The process table's title (a count, cards whose processes are unknown), ``/`` and ``u``.

Issue 28: the process count in the title, filtering by user or text, an "only mine" view,
and a clear word where NVML will not list a card's processes (``--fake faulty``, GPU 0).
"""

from __future__ import annotations

import pytest
from helpers.dashboard import first_sample, make_app
from textual.geometry import Region
from textual.widgets import Input

from gputop.tui.app import GputopApp
from gputop.tui.screens.filter import FilterScreen
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable

BIG, SMALL = (160, 48), (80, 24)


def table(app: GputopApp) -> ProcessTable:
    return app.query_one(ProcessTable)


def total_processes(app: GputopApp) -> int:
    assert app.snapshot is not None
    return sum(len(gpu.processes) for gpu in app.snapshot.gpus)


async def filter_by(app: GputopApp, pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash")
    assert isinstance(app.screen, FilterScreen)
    app.screen.query_one(Input).value = text
    await pilot.press("enter")
    assert not isinstance(app.screen, FilterScreen)


@pytest.mark.parametrize("size", [BIG, SMALL])
async def test_a_card_whose_processes_nvml_will_not_list_says_so(size: tuple[int, int]) -> None:
    app = make_app("faulty")
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        assert app.snapshot is not None
        unlisted = [g.physical_index for g in app.snapshot.gpus if not g.processes_listed]
        assert unlisted == [0]
        title = str(table(app).border_title)
        assert "GPU 0: process list unavailable (NVML will not list it)" in title
        grid = app.query_one(GpuGrid)
        if size == BIG:  # the full card's subtitle; one-line cards have no room for it
            assert "processes: not listed" in str(grid.subtitle(0))
        for other in grid.cards:
            if other != 0:
                assert "not listed" not in str(grid.subtitle(other) or "")


async def test_a_scenario_where_every_list_is_known_says_nothing_of_it() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert "unavailable" not in str(table(app).border_title)


async def test_the_title_counts_the_processes() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        total = total_processes(app)
        assert total > 1
        assert str(table(app).border_title) == f"{total} processes"
        assert table(app).row_count == total


async def test_slash_filters_by_user_or_text_and_empty_shows_all_again() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        total = total_processes(app)
        await filter_by(app, pilot, "CAROL")  # a user, any case
        rows = table(app).rows
        assert rows and all(row.process.user == "carol" for row in rows)
        assert str(table(app).border_title) == f"{len(rows)} of {total} processes"
        assert 'matching "CAROL"' in str(table(app).border_subtitle)

        await filter_by(app, pilot, "ipykernel")  # part of a command line
        assert [row.process.user for row in table(app).rows] == ["bob"]

        await filter_by(app, pilot, "no such thing anywhere")
        assert table(app).row_count == 0
        assert str(table(app).border_title) == f"0 of {total} processes"

        await filter_by(app, pilot, "")
        assert table(app).row_count == total


async def test_escape_in_the_filter_keeps_the_filter_there_was() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await filter_by(app, pilot, "dave")
        shown = table(app).row_count
        await pilot.press("slash")
        assert app.screen.query_one(Input).value == "dave"  # the current one, to edit
        app.screen.query_one(Input).value = "eve"
        await pilot.press("escape")
        assert not isinstance(app.screen, FilterScreen)
        assert table(app).text_filter == "dave" and table(app).row_count == shown


async def test_a_hostile_filter_is_shown_cleaned_and_matches_nothing_else() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await filter_by(app, pilot, "\x1b[2J\x1b]0;pwned\x07" + "x" * 5000)
        assert table(app).row_count == 0
        subtitle = str(table(app).border_subtitle)
        assert "\x1b" not in subtitle and "\x07" not in subtitle


async def test_a_filter_that_looks_like_markup_is_shown_as_written() -> None:
    app = make_app("demo")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await filter_by(app, pilot, "[bold]x[/] [red")
        shown = table(app)
        width, height = shown.outer_size
        bottom = shown.render_lines(Region(0, height - 1, width, 1))[0]
        assert 'matching "[bold]x[/] [red", by' in bottom.text, bottom.text
        assert not any(segment.style and segment.style.bold for segment in bottom)


async def test_u_shows_only_your_own_processes_and_again_everyone_s() -> None:
    app = make_app("demo")  # the user is alice (gputop.tui.screenshots)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        total = total_processes(app)
        await pilot.press("u")
        rows = table(app).rows
        assert rows and all(row.process.user == "alice" for row in rows)
        assert len(rows) < total
        assert "yours only" in str(table(app).border_subtitle)
        await filter_by(app, pilot, "carol")  # both at once: nobody is both
        assert table(app).row_count == 0
        await filter_by(app, pilot, "")
        await pilot.press("u")
        assert table(app).row_count == total
