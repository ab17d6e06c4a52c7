"""The dashboard tells its sampler which processes are in sight (issue 44): the others'
/proc is read less often (gputop.core.sampling.host_processes, tested there)."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app
from helpers.waiting import pilot_wait_for

from gputop.tui.widgets.process_table import SHOWN_MARGIN_ROWS, ProcessTable


def _sampler_shown(app: object) -> frozenset[int] | None:
    return app.backend._host_processes.shown  # type: ignore[attr-defined]


def _rows_pids(table: ProcessTable, start: int, stop: int) -> set[int]:
    return {row.process.pid for row in table.rows[max(0, start) : stop]}


async def test_the_sampler_is_told_the_rows_in_sight_and_follows_a_scroll() -> None:
    app = make_app("dgx-h100")  # 200 processes
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        page = table.scrollable_content_region.height - 1
        assert table.row_count == 200 and page < 100
        top = _rows_pids(table, 0, page + SHOWN_MARGIN_ROWS)
        # the first sample may be shown before the layout settles: the next one says it
        await pilot_wait_for(pilot, lambda: _sampler_shown(app) == top, "the rows in sight", 10)
        table.move_cursor(table.row_count - 1)  # to the last row: the table scrolls
        await pilot_wait_for(
            pilot,
            lambda: table.rows[-1].process.pid in (_sampler_shown(app) or ()),
            "the last row in sight",
            10,
        )
        now = _sampler_shown(app)
        assert now == _rows_pids(table, 200 - page - SHOWN_MARGIN_ROWS, 200)
        assert not now & _rows_pids(table, 0, 200 - page - SHOWN_MARGIN_ROWS)


async def test_sorted_by_a_host_column_or_filtered_every_process_is_read() -> None:
    app = make_app("dgx-h100")
    async with app.run_test(size=(200, 50)) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        assert _sampler_shown(app) is not None
        while table.sort_key.name != "CPU":
            app.action_cycle_sort()
        assert _sampler_shown(app) is None  # the order itself is the host's figures
        app.action_cycle_sort()  # SM: the GPU's own figure
        assert table.sort_key.name == "SM" and _sampler_shown(app) is not None
        table.set_text_filter("python")  # a filter matches every cell, CPU's too
        assert _sampler_shown(app) is None
        table.set_text_filter("")
        assert _sampler_shown(app) is not None
