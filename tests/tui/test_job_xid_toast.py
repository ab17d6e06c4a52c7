"""The toast at a job's end names the Xids its card had while it ran, from the dashboard's
live health (issue 42: the job's end notification; docs/health.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers.dashboard import first_sample
from helpers.waiting import pilot_wait_for
from textual.widgets import Input

from gputop.core.jobs.model import JobState
from gputop.core.sampling.source import open_backend
from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.screenshots import SCREENSHOT_USER

BIG = (160, 48)


async def test_a_job_whose_card_had_an_xid_while_it_ran_says_so_in_its_toast(
    tmp_path: Path,
) -> None:
    # the simulated cards on the wall clock (not frozen as in the pictures): an Xid is
    # stamped with the time the job's start and end are
    backend = open_backend("v100x4", environ={})
    app = GputopApp(backend, interval_s=1.0, probes=False, user=SCREENSHOT_USER, environ={})
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        screen.query_one("#cwd", Input).value = str(tmp_path)
        command = f"{sys.executable} -c 'import time, sys; time.sleep(3); sys.exit(4)'"
        screen.query_one("#command", Input).value = command
        screen.query_one("#command", Input).focus()
        await pilot.press("enter")

        def running_card() -> int | None:
            for job in app.jobs_service.view.jobs:
                if job.state is JobState.RUNNING and job.physical_indices:
                    return job.physical_indices[0]
            return None

        await pilot_wait_for(pilot, lambda: running_card() is not None, "the job running")
        card = running_card()
        assert card is not None
        app.backend.nvml.inject_xid(card, 13, count=3)

        def ended() -> list[str]:
            return [str(n.message) for n in app._notifications if "failed 4" in str(n.message)]

        await pilot_wait_for(pilot, ended, "the toast for the job's end", timeout_s=30)
        (toast,) = ended()
        assert toast.endswith("; its GPUs had Xid 13 ×3 while it ran."), toast
