"""The palette's "Maximize" (ctrl+p) gives the focused panel the whole screen, every one whose
text can run past its panel: the jobs panel kept its 12 lines at the foot of a screen of
hatching, and the PyTorch view was not maximized at all (found by using it). The cards are
as tall as they are, maximized or not."""

from __future__ import annotations

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for
from textual.widget import Widget

from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable
from gputop.tui.widgets.torch_panel import TorchPanel

SIZE = (160, 48)


@pytest.mark.parametrize("panel", [ProcessTable, TorchPanel, JobsPanel])
async def test_the_focused_panel_maximized_fills_the_screen(panel: type[Widget]) -> None:
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        if panel is JobsPanel:
            await pilot.press("J")
            await pilot_wait_for(pilot, lambda: isinstance(app.focused, JobsPanel), "the jobs")
        widget = app.query_one(panel)
        widget.focus()
        await pilot.pause()
        app.screen.action_maximize()
        await pilot_wait_for(pilot, lambda: app.screen.maximized is widget, "it maximized")
        await pilot.pause()
        # the whole screen but the header's two lines and the key bar
        assert widget.region.height >= SIZE[1] - 3, (panel.__name__, widget.region)
        assert widget.region.width == SIZE[0], (panel.__name__, widget.region)
