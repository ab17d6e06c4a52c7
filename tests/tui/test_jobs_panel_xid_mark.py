"""The dashboard's jobs panel marks a job whose cards had an Xid while it ran (issue 42), from
the cards' live health, as the toast at its end does: ``✖ Xid 79`` after its status, while it
runs and after it ended; a job on another card is not marked. docs/health.md."""

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
from gputop.tui.widgets.jobs_panel import COLUMNS, JobsPanel


def status_of(app: GputopApp, job_id: int) -> str:
    panel = app.query_one(JobsPanel)
    for row in range(panel.row_count):
        cells = dict(zip(COLUMNS, (str(c) for c in panel.get_row_at(row)), strict=True))
        if cells["ID"] == str(job_id):
            return cells["STATUS"]
    return ""


async def test_a_job_whose_card_had_an_xid_is_marked_in_the_jobs_panel(tmp_path: Path) -> None:
    # the simulated cards on the wall clock: an Xid is stamped with the time the job's are
    backend = open_backend("v100x4", environ={})
    app = GputopApp(backend, interval_s=0.5, probes=False, user=SCREENSHOT_USER, environ={})
    done = tmp_path / "done"
    wait = f"iter(lambda: os.path.exists({str(done)!r}), True)"
    job = f"import os, time; [time.sleep(0.05) for _ in {wait}]"
    async with app.run_test(size=(160, 48)) as pilot:
        await first_sample(pilot)
        for keys in ((), ("right",)):  # two jobs: on GPU 0, then on GPU 1
            await pilot.press(*keys, "l")
            await pilot_wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), "dialog")
            screen = app.screen
            screen.query_one("#cwd", Input).value = str(tmp_path)
            screen.query_one("#command", Input).value = f"{sys.executable} -c {job!r}"
            screen.query_one("#command", Input).focus()
            await pilot.press("enter")
            await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen), "gone")

        def running() -> list[tuple[int, int]]:
            return [
                (job.id, job.physical_indices[0])
                for job in app.jobs_service.view.jobs
                if job.state is JobState.RUNNING and job.physical_indices
            ]

        await pilot_wait_for(pilot, lambda: len(running()) == 2, "both jobs running")
        (marked, card), (other, other_card) = sorted(running())
        assert card != other_card
        assert "Xid" not in status_of(app, marked)
        app.backend.nvml.inject_xid(card, 79)
        await pilot_wait_for(
            pilot, lambda: status_of(app, marked) == "running ✖ Xid 79", "the running job marked"
        )
        done.write_text("", encoding="utf-8")
        await pilot_wait_for(
            pilot,
            lambda: all(status_of(app, j).startswith("exited") for j in (marked, other)),
            "both ended",
        )
        assert status_of(app, marked).endswith(" ✖ Xid 79"), status_of(app, marked)
        assert "Xid" not in status_of(app, other), status_of(app, other)
