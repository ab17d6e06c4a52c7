"""J and p (at 80x24) show a panel in the lower one's place and take the keys there; again, they
give them back where they were."""

from __future__ import annotations

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for

from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.torch_panel import TorchPanel


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_j_twice_gives_the_keys_back_to_the_processes(size: tuple[int, int]) -> None:
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=size) as pilot:
        await first_sample(pilot)
        app.query_one(ProcessTable).focus()
        await pilot.press("J")
        await pilot_wait_for(pilot, lambda: isinstance(app.focused, JobsPanel), "the jobs")
        await pilot.press("J")
        await pilot_wait_for(pilot, lambda: not app.jobs_shown, "the jobs hidden")
        await pilot.pause()
        assert isinstance(app.focused, ProcessTable), app.focused


async def test_j_twice_from_the_cards_leaves_them_the_keys() -> None:
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        assert isinstance(app.focused, GpuGrid)
        await pilot.press("J", "J")
        await pilot_wait_for(pilot, lambda: not app.jobs_shown, "the jobs hidden")
        await pilot.pause()
        assert isinstance(app.focused, GpuGrid), app.focused


async def test_p_twice_at_80x24_gives_the_keys_back_to_the_processes() -> None:
    """At 80x24 the PyTorch view takes the process table's place (one lower panel): the keys
    the table had go to it, and p again gives them back, as J does for the jobs."""
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_sample(pilot)
        app.query_one(ProcessTable).focus()
        await pilot.press("p")
        await pilot_wait_for(pilot, lambda: isinstance(app.focused, TorchPanel), "the view")
        await pilot.press("p")
        await pilot_wait_for(pilot, lambda: not app.torch_shown, "the view hidden")
        await pilot.pause()
        assert isinstance(app.focused, ProcessTable), app.focused
