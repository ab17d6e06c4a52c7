"""The jobs panel's table (a DataTable) is mounted when first needed, not at start: a start
without jobs neither mounts it nor imports DataTable before the first frame (docs/speed.md,
"The first frame"); a job to list, J, a launch or the palette bring it, with the jobs last read."""

from __future__ import annotations

from helpers.dashboard import first_sample, make_app
from helpers.hostile import add_job
from helpers.start_imports import loaded_at_start
from helpers.waiting import pilot_wait_for

from gputop.tui.widgets.jobs_panel import JobsPanel

BIG = (160, 48)


def test_the_dashboard_does_not_import_the_jobs_table_at_start() -> None:
    later = (
        "gputop.tui.widgets.jobs_panel",
        "gputop.tui.widgets.jobs_table",
        "textual.widgets._data_table",
    )
    assert loaded_at_start(later) == []


async def test_without_jobs_the_table_comes_with_J_and_the_jobs_last_read() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot_wait_for(pilot, lambda: app.jobs_service.view.read_number > 0, "a read")
        await pilot.pause()
        assert not app.query(JobsPanel)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        assert app.focused is panel and panel.display
        assert str(panel.border_subtitle).startswith("0 jobs, 0 active")
        await pilot.press("J")
        assert not app.query_one("#jobs-box").display and app.query_one(JobsPanel) is panel


async def test_a_job_in_the_store_at_start_is_listed_before_J() -> None:
    job = add_job("resnet", ["python", "train.py"])
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot_wait_for(pilot, lambda: app.query(JobsPanel), "the jobs table")
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.row_count == 1, "the job listed")
        assert not app.query_one("#jobs-box").display
        assert panel.current_job is not None and panel.current_job.id == job.id
        await pilot.press("J")
        assert app.focused is panel and app.query_one(JobsPanel) is panel
