"""What the dashboard says once a launch from it is done (l, then enter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.dashboard import first_sample, make_app, open_launch_dialog
from helpers.jobs import asked_job
from helpers.waiting import pilot_wait_for

from gputop.core.jobs.model import JobState, RunMode
from gputop.tui.screens.launch import LaunchScreen


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (RunMode.TMUX, "Job 7 (train.py) launched on GPU 0 in tmux window gputop-7. Log: "),
        (RunMode.DETACHED, "Job 7 (train.py) launched on GPU 0. Log: "),
    ],
)
async def test_a_launch_says_where_the_job_runs(tmp_path: Path, mode: RunMode, said: str) -> None:
    """A job run in a new tmux window is told by the window's name, as 'gputop run --tmux'
    says it: the window is made in the background (the dashboard keeps the screen)."""
    app = make_app("demo", interval_s=3600.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        screen = await open_launch_dialog(app, pilot)
        log = str(tmp_path / "7.log")
        job = asked_job(id=7, mode=mode, state=JobState.RUNNING, log_path=log)
        screen.dismiss(job)  # what the dialog hands back once the job is launched
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        await pilot_wait_for(
            pilot, lambda: any("Job 7 (" in n.message for n in app._notifications), "the word"
        )
        assert [n.message for n in app._notifications if "Job 7 (" in n.message] == [said + log]
