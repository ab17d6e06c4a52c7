"""What a new user's first hour with the keys finds (issue 40): ctrl+c's hint, where the
focus is after a launch and after a panel goes away, and that it shows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.dashboard import first_sample, launch, make_app
from helpers.hostile import add_job
from helpers.waiting import pilot_wait_for
from textual.color import Color
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget

from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.torch_panel import TorchPanel

BIG = (160, 48)
SMALL = (80, 24)


def notifications(app: object) -> list[str]:
    return [str(n.message) for n in app._notifications]  # type: ignore[attr-defined]


async def test_ctrl_c_says_in_plain_words_that_q_quits() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        (said,) = notifications(app)
        assert said == "Press q to quit (launched jobs keep running)."
        assert "[" not in said and "ctrl+q" not in said


# -- the focus after a launch ----------------------------------------------------------------


async def launch_on(app: GputopApp, pilot: Pilot[None], tmp_path: Path) -> None:
    """``l``, a command, enter; then wait until the jobs panel shows the job."""
    await pilot.press("l")
    await pilot_wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), "the dialog")
    await launch(app, pilot, f"{sys.executable} -c pass", tmp_path)
    panel = app.query_one(JobsPanel)
    await pilot_wait_for(pilot, lambda: panel.current_job is not None, "the job in the panel")


async def test_after_a_launch_the_focus_stays_on_the_cards(state_dir: Path, tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        cards = app.query_one(GpuGrid)
        await pilot.press("right")  # GPU 1
        await launch_on(app, pilot, tmp_path)
        assert app.query_one(JobsPanel).display  # shown, its new job highlighted
        assert app.focused is cards
        await pilot.press("right", "space")  # still the cards': GPU 2 highlighted, selected
        assert cards.highlighted == 2 and cards.selection == (2,)
        await pilot.press("l")
        await pilot_wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), "the dialog")
        assert app.screen.context.physical_indices == (2,)  # type: ignore[attr-defined]


async def test_after_a_launch_from_the_processes_the_focus_stays_there(
    state_dir: Path, tmp_path: Path
) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("tab")
        table = app.query_one(ProcessTable)
        assert app.focused is table
        await launch_on(app, pilot, tmp_path)
        await pilot.pause()
        assert app.focused is table


async def test_at_80x24_a_launch_from_the_processes_gives_the_focus_to_the_cards(
    state_dir: Path, tmp_path: Path
) -> None:
    """The jobs panel takes the processes' place there: the focus goes to the cards, as
    wherever the panel that had it is hidden, not to the jobs Textual would pick."""
    app = make_app("v100x4")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        await pilot.press("tab")
        assert app.focused is app.query_one(ProcessTable)
        await launch_on(app, pilot, tmp_path)
        await pilot_wait_for(
            pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards' focus"
        )
        assert not app.query_one(ProcessTable).display


async def test_J_hiding_the_focused_jobs_gives_the_focus_to_the_cards() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        assert app.focused is app.query_one(JobsPanel)
        await pilot.press("J")
        await pilot_wait_for(
            pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards' focus"
        )


async def test_hiding_the_focused_pytorch_view_gives_the_focus_to_the_cards() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("tab", "tab")
        assert app.focused is app.query_one(TorchPanel)
        await pilot.press("p")
        await pilot_wait_for(
            pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards' focus"
        )
        await pilot.press("right")
        assert app.query_one(GpuGrid).highlighted == 1


async def test_a_smaller_terminal_that_hides_the_focused_panel_gives_the_focus_to_the_cards() -> (
    None
):
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("tab", "tab")
        assert app.focused is app.query_one(TorchPanel)
        await pilot.resize_terminal(*SMALL)
        await pilot_wait_for(
            pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards' focus"
        )


# -- the focus shows -------------------------------------------------------------------------


def border_colour(widget: Widget) -> Color:
    return widget.styles.border_top[1]


def card_colours(app: GputopApp, physical_index: int) -> set[object]:
    """The colours the card's rows are drawn in."""
    strips = app.query_one(GpuGrid).card_strips(physical_index)
    return {
        (segment.style.color, segment.style.bgcolor)
        for strip in strips
        for segment in strip
        if segment.style is not None
    }


@pytest.mark.parametrize("size", [BIG, SMALL], ids=["160x48", "80x24"])
async def test_each_panel_shows_whether_it_has_the_focus(size: tuple[int, int]) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        cards = app.query_one(GpuGrid)
        focused_card = card_colours(app, 0)
        panels: list[Widget] = [app.query_one(ProcessTable)]
        panels.append(app.jobs_table())  # mounted when first needed, here
        panels.append(app.query_one(TorchPanel))
        for panel in panels:
            if isinstance(panel, JobsPanel):
                await pilot.press("J")
            elif isinstance(panel, TorchPanel):
                await pilot.press("J" if app.has_class("-jobs-shown") else "p")
                if not panel.display:
                    await pilot.press("p")
            else:
                panel.focus()
            panel.focus()
            await pilot.pause()
            assert app.focused is panel and panel.region.height > 0
            shown_focused = border_colour(panel)
            cards.focus()
            await pilot.pause()
            assert border_colour(panel) != shown_focused, f"{panel} looks the same unfocused"
            assert card_colours(app, 0) == focused_card
            panel.focus()
            await pilot.pause()
            assert card_colours(app, 0) != focused_card, "the cards look focused"


# -- a long job name -------------------------------------------------------------------------

LONG_NAME = "resnet50-imagenet-sweep-lr3e-4-wd0.05-bs256-seed17x"  # 51 characters


def panel_lines(panel: JobsPanel) -> list[str]:
    """The jobs panel's heading and first row as drawn, as far as its width goes."""
    strips = panel.render_lines(Region(0, 0, panel.size.width, panel.size.height))
    lines = [strip.text for strip in strips]
    heading = next(n for n, line in enumerate(lines) if " NAME " in line)
    return lines[heading : heading + 2]


@pytest.mark.parametrize(
    ("size", "keys"), [(SMALL, ("J",)), (BIG, ("J",))], ids=["80x24", "160x48-pytorch-view"]
)
async def test_a_long_job_name_is_cut_so_its_status_and_columns_show(
    state_dir: Path, size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    assert len(LONG_NAME) == 51
    job = add_job(LONG_NAME, ["python", "train.py"])
    app = make_app("v100x4")
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        await pilot.press(*keys)
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        if size == BIG:
            assert app.query_one(TorchPanel).region.width > 0  # beside the PyTorch view
        shown = app.query_one(JobsPanel).current_job
        assert shown is not None and shown.id == job.id
        heading, row = panel_lines(panel)
        for column in ("STATUS", "STARTED", "DURATION", "GPU TIME", "PEAK", "SM ACT", "LAST"):
            assert column in heading, f"{column} is off the panel: {heading!r}"
        assert f" {shown.status_text} " in row
        assert "resnet50" in row and "…" in row and LONG_NAME not in row
        assert row.rstrip().endswith(row.rstrip()[-1])  # drawn to the edge, nothing wraps
        # and the whole name is still the job's: the log screen and gputop jobs say it
        assert shown.name == LONG_NAME


async def test_a_wider_panel_shows_more_of_the_name(state_dir: Path) -> None:
    add_job(LONG_NAME, ["python", "train.py"])
    app = make_app("v100x4")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 1, "the job in the panel")
        await pilot.pause()
        narrow = panel_lines(panel)[1]
        await pilot.resize_terminal(200, 50)

        def whole() -> bool:
            """the whole name once the panel is wide enough"""
            return LONG_NAME in panel_lines(panel)[1]

        await pilot_wait_for(pilot, whole)
        assert LONG_NAME not in narrow


async def test_the_labs_highlighted_card_shows_whether_the_cards_have_the_focus() -> None:
    from helpers.lab_dashboard import first_lab_sample, lab_cards

    from gputop.tui.screenshots import build_lab_app

    app = build_lab_app(3)
    async with app.run_test(size=BIG) as pilot:
        await first_lab_sample(pilot)
        await pilot_wait_for(pilot, lambda: lab_cards(app), "the lab's cards")
        cards, index = next((c, i) for c, i in lab_cards(app) if c.card_state(i).highlighted)

        def corner() -> object:  # the colour of the card's top left corner
            style = next(iter(cards.card_strips(index)[0])).style
            return None if style is None else style.color

        focused = corner()
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is app.query_one("#processes")
        assert corner() != focused
        assert border_colour(app.query_one("#processes")).rich_color == focused  # theirs
        await pilot.press("shift+tab")
        await pilot.pause()
        assert corner() == focused


async def test_the_lab_in_a_smaller_terminal_gives_the_hidden_panels_focus_to_the_cards() -> None:
    from helpers.lab_dashboard import first_lab_sample

    from gputop.tui.lab.lab_grid import LabGrid
    from gputop.tui.screenshots import build_lab_app

    app = build_lab_app(3)
    async with app.run_test(size=BIG) as pilot:
        await first_lab_sample(pilot)
        torch = app.query_one(TorchPanel)
        torch.focus()
        await pilot.pause()
        assert app.focused is torch
        await pilot.resize_terminal(*SMALL)
        await pilot_wait_for(
            pilot, lambda: app.focused is app.query_one(LabGrid), "the lab cards' focus"
        )
