"""The keys after the terminal shrinks and grows again: the panel the small layout hid gets
them back when it is shown again, unless the person gave them to another panel meanwhile."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for

from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.torch_panel import TorchPanel

BIG = (160, 48)
SMALL = (80, 24)


async def test_the_pytorch_view_gets_the_keys_back_when_the_terminal_grows_again() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        torch = app.query_one(TorchPanel)
        await pilot.press("tab", "tab")
        assert app.focused is torch
        await pilot.resize_terminal(*SMALL)
        await pilot_wait_for(pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards")
        assert not torch.display or torch.region.height == 0  # hidden there (p shows it)
        await pilot.resize_terminal(*BIG)
        await pilot_wait_for(pilot, lambda: app.focused is torch, "the PyTorch view's keys")
        await pilot.press("down")  # its keys: the cards' highlight stays
        assert app.query_one(GpuGrid).highlighted == 0


async def test_keys_given_to_another_panel_at_the_small_size_stay_there() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        torch, table = app.query_one(TorchPanel), app.query_one(ProcessTable)
        await pilot.press("tab", "tab")
        assert app.focused is torch
        await pilot.resize_terminal(*SMALL)
        await pilot_wait_for(pilot, lambda: app.focused is app.query_one(GpuGrid), "the cards")
        await pilot.press("tab")
        assert app.focused is table
        await pilot.resize_terminal(*BIG)
        await pilot_wait_for(pilot, lambda: torch.region.height > 0, "the PyTorch view shown")
        await pilot.pause()
        assert app.focused is table
