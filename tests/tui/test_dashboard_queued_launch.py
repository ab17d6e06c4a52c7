"""A job launched with "wait until free" on a busy card is queued, and the dashboard says so
(issue 40: ``gputop run --wait`` and the dialog said "launched" of a job that had not started).
"""

from __future__ import annotations

from pathlib import Path

from helpers.dashboard import launch, make_app, open_launch_dialog
from helpers.waiting import pilot_wait_for
from textual.widgets import Checkbox

from gputop.cli.main import main
from gputop.core.jobs.model import JobState
from gputop.core.jobs.store import JobStore
from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.widgets.jobs_panel import JobsPanel

BIG = (160, 48)


async def test_a_job_waiting_for_its_busy_card_is_said_to_be_queued(tmp_path: Path) -> None:
    app = make_app("v100x4")  # GPU 0 is busy
    messages: list[str] = []
    shown = app.notify

    def notify(message: str, **options: object) -> None:
        messages.append(message)
        shown(message, **options)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    try:
        await _launch_waiting(app, tmp_path)
    finally:
        assert main(["jobs", "stop", "1", "--yes"]) in (0, 1)  # never left waiting
    (said,) = [m for m in messages if m.startswith("Job 1 ")]
    assert said.startswith("Job 1 (sleep) queued for GPU 0: it starts once the card is free.")
    assert "launched" not in said


async def _launch_waiting(app: GputopApp, tmp_path: Path) -> None:
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        screen.query_one("#wait", Checkbox).value = True
        await launch(app, pilot, "sleep 30", tmp_path)
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        await pilot_wait_for(pilot, lambda: app.query_one(JobsPanel).display)
        with JobStore.open() as store:
            assert store.get(1).state is JobState.WAITING
