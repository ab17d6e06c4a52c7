"""A line cut to the screen's width says so: it ends with an ellipsis (the process table's
COMMAND column is the exception: it scrolls with ←/→)."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app
from textual.geometry import Region
from textual.widget import Widget

from gputop.tui.widgets.gpu_grid import GpuGrid
from gputop.tui.widgets.status_bar import HostBar, StatusBar

SMALL = (80, 24)


def first_line(widget: Widget) -> str:
    width = widget.outer_size.width
    return widget.render_lines(Region(0, 0, width, 1))[0].text.strip()  # less the padding


async def test_the_top_lines_cut_at_80_columns_end_with_an_ellipsis() -> None:
    app = make_app("demo")
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        status, host = first_line(app.query_one(StatusBar)), first_line(app.query_one(HostBar))
        assert status.endswith("…"), status
        assert host.startswith("up 22d00h  load ") and host.endswith("…"), host
        await pilot.resize_terminal(160, 48)  # room for all of it: no ellipsis
        await pilot.pause()
        host = first_line(app.query_one(HostBar))
        assert "…" not in host and host.endswith("GiB"), host


async def test_a_long_gpu_name_on_a_one_line_card_ends_with_an_ellipsis() -> None:
    app = make_app("faulty")  # GPU 1 is a Tesla P100-PCIE-16GB
    async with app.run_test(size=SMALL) as pilot:
        await first_sample(pilot)
        grid = app.query_one(GpuGrid)
        line = grid.card_lines(1)[0].strip()  # less the padding
        # cut for its health mark (faulty's P100 has pages pending retirement: docs/health.md)
        assert line.startswith("○ 1 Tesla P100-PCIE… ⚠ █"), line
        line = grid.card_lines(0)[0].strip()
        assert line.startswith("▶○ 0 GeForce RTX 3090   "), line  # it fits: no ellipsis
