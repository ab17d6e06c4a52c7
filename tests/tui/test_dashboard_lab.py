"""The dashboard across hosts, driven by fixed in-process hosts (no ssh): layout and keys."""

from __future__ import annotations

import pytest
from helpers.lab_dashboard import first_lab_sample, make_lab_app
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputop import __version__
from gputop.core.remote.status import HostStatus, LinkState
from gputop.core.remote.transport import Failure
from gputop.tui.lab.fixed_hosts import simulated_status
from gputop.tui.lab.host_line import HostLine
from gputop.tui.lab.lab_grid import LabGrid
from gputop.tui.lab.lab_processes import LabProcessTable


def host_lines(app) -> list[str]:  # type: ignore[no-untyped-def]
    grid = app.query_one(LabGrid)
    return [group.line.plain for group in grid.groups]


async def test_every_host_has_a_summary_line_with_state_free_cards_and_busiest_user() -> None:
    app = make_lab_app(count=5)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        lines = host_lines(app)
    assert [line.split()[1] for line in lines] == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    assert "live  2/4 free" in lines[0] and "top ubuntu" in lines[0]
    assert "stale for 12 s" in lines[2]
    assert "unreachable: its host key is not known yet" in lines[3]
    assert "reduced mode" in lines[4]


async def test_an_unreachable_host_is_said_with_what_to_do_and_the_others_keep_running() -> None:
    app = make_lab_app(count=5)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        notes = [str(n.message) for n in app._notifications]
        cards = len(app.query_one(LabGrid).groups[0].physical)
    assert any(
        "gpu04: unreachable: its host key is not known yet; run `ssh gpu04` once" in n
        for n in notes
    )
    assert cards == 4


async def test_g_jumps_to_the_next_host_and_G_back() -> None:
    app = make_lab_app(count=5)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("g")
        after_g = app.query_one(LabGrid).host
        await pilot.press("G", "G")
        after_back = app.query_one(LabGrid).host
    assert (after_g, after_back) == (1, 4)


async def test_twenty_hosts_at_80x24_collapse_all_but_the_highlighted_one() -> None:
    app = make_lab_app(count=20)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_lab_sample(pilot)
        grid = app.query_one(LabGrid)
        expanded = [p for p in range(20) if grid.is_expanded(p)]
        await pilot.press("g")
        expanded_after_jump = [p for p in range(20) if grid.is_expanded(p)]
    assert expanded == [0]
    assert expanded_after_jump == [1]


async def test_c_collapses_the_highlighted_host_and_expands_it_again() -> None:
    app = make_lab_app(count=3)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        grid = app.query_one(LabGrid)
        await pilot.press("c")
        collapsed = grid.is_expanded(0), grid.groups[0].cards.display
        await pilot.press("c")
        expanded = grid.is_expanded(0), grid.groups[0].cards.display
    assert collapsed == (False, False)
    assert expanded == (True, True)


async def test_down_goes_to_the_card_drawn_below_where_the_scrollbar_narrows_the_cards() -> None:
    """Every host expanded, the grid scrolls: its cards get one cell less than the grid, at
    152 columns room for two cards to a row, not four; down goes to the card drawn below."""
    app = make_lab_app(count=8)
    async with app.run_test(size=(152, 48)) as pilot:
        await first_lab_sample(pilot)
        grid = app.query_one(LabGrid)
        if not grid.toggle_all():
            grid.toggle_all()
        grid.jump_host(0)  # host 0's first card
        await pilot.pause()
        assert grid.scrollbars_enabled[0]
        columns = grid.groups[0].cards.columns_shown()
        await pilot.press("down")
    assert columns == 2
    assert (grid.host, grid.highlighted) == (0, grid.groups[0].physical[2])


async def test_selecting_a_card_on_another_host_starts_a_new_selection_and_says_so() -> None:
    app = make_lab_app(count=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        await pilot.press("space", "right", "space")  # GPUs 0 and 1 of gpu01
        first = (app.query_one(LabGrid).selection_host, app.query_one(LabGrid).selection)
        await pilot.press("g", "space")  # GPU 0 of gpu02
        second = (app.query_one(LabGrid).selection_host, app.query_one(LabGrid).selection)
        notes = [str(n.message) for n in app._notifications]
    assert first == (0, (0, 1))
    assert second == (1, (0,))
    assert any("the cards selected on gpu01 were dropped" in n for n in notes)


async def test_the_process_table_has_a_host_column_and_h_filters_by_host() -> None:
    app = make_lab_app(count=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        table = app.query_one(LabProcessTable)
        hosts_before = {row.text(0) for row in table.rows}
        await pilot.press("g", "h")
        hosts_after = {row.text(0) for row in table.rows}
    assert table.columns[0] == "HOST"
    assert hosts_before == {"gpu01", "gpu02"}
    assert hosts_after == {"gpu02"}


async def test_one_host_has_no_host_column() -> None:
    app = make_lab_app([simulated_status("gpu1", "v100x4")])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        columns = app.query_one(LabProcessTable).columns
    assert columns[0] == "GPU"


async def test_a_host_name_with_terminal_controls_is_drawn_cleaned() -> None:
    hostile = "evil\x1b[31m\x07host"
    status = HostStatus(hostile, LinkState.UNREACHABLE, failure=Failure("resolve", "unknown"))
    app = make_lab_app([status, simulated_status("gpu1", "v100x4")])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        line = host_lines(app)[0]
    assert "\x1b" not in line and "\x07" not in line
    assert "evil" in line and "host" in line


async def test_a_host_going_unreachable_is_shown_and_its_cards_stay() -> None:
    from gputop.tui.lab.fixed_hosts import FixedHosts

    live = simulated_status("gpu1", "v100x4")
    app = make_lab_app([live, simulated_status("gpu2", "v100x4")])
    source = app.source
    assert isinstance(source, FixedHosts)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        source.set(
            0,
            HostStatus(
                "gpu1",
                LinkState.UNREACHABLE,
                snapshot=live.snapshot,
                failure=Failure("refused", "connection refused"),
            ),
        )
        while "unreachable" not in host_lines(app)[0]:
            await pilot.pause(0.05)
        cards = len(app.query_one(LabGrid).groups[0].physical)
    assert cards == 4


def _cells(strips: list[Strip]) -> list[tuple[str, Style | None]]:
    return [(char, segment.style) for strip in strips for segment in strip for char in segment.text]


@pytest.mark.parametrize(("count", "size"), [(5, (160, 48)), (20, (80, 24))])
@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "ansi-dark"])
async def test_host_lines_paint_exactly_what_textual_would(
    count: int, size: tuple[int, int], theme: str
) -> None:
    # A host line paints itself (docs/speed.md): cell for cell, style for style, what
    # Textual's own painting of the same widget gives; highlighted and scrolled lines too.
    app = make_lab_app(count=count)
    async with app.run_test(size=size) as pilot:
        await first_lab_sample(pilot)
        app.theme = theme
        await pilot.press("G")  # the highlight on a summary line, far down: scrolled
        await pilot.pause()
        lines = list(app.query(HostLine))
        assert len(lines) == count
        for line in lines:
            width, height = line.region.size
            for crop in (Region(0, 0, width, height), Region(3, 0, width - 10, height)):
                ours = line.render_lines(crop)
                assert _cells(ours) == _cells(Widget.render_lines(line, crop)), line.plain


async def test_a_host_with_an_older_gputop_says_so_on_its_line_and_once_in_full() -> None:
    statuses = [
        simulated_status("gpu01", "v100x4", agent_version="0.0.9"),
        simulated_status("gpu02", "v100x4"),
    ]
    app = make_lab_app(statuses)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        lines = host_lines(app)
        notes = [str(n.message) for n in app._notifications]
    assert "live, older gputop" in lines[0]
    assert "older" not in lines[1]
    assert [n for n in notes if "older" in n] == [
        f"gpu01: live, gputop 0.0.9 there, older than this {__version__} (it lacks the lab's "
        "jobs, launching and signals (gputop jobs, run --json, signal)); update it: gputop "
        "hosts install gpu01"
    ]


async def test_h_on_a_remote_process_says_its_own_history_is_not_shown_yet() -> None:
    from gputop.tui.screens.process_history import ProcessHistoryScreen

    app = make_lab_app(count=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_lab_sample(pilot)
        app.query_one(LabProcessTable).focus()
        await pilot.press("H")
        await pilot.pause()
        notes = [str(n.message) for n in app._notifications]
        shown = app.screen
    assert not isinstance(shown, ProcessHistoryScreen)  # never this machine's store
    assert any("A remote process's own history is not shown yet" in note for note in notes)
