"""The dashboard shows what each job used: in the jobs panel and in the job's log view.

A real job on simulated cards (the scenario's ``job_profile`` puts it on them), measured by
its real supervisor; the dashboard only reads the store.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from helpers.dashboard import first_sample, make_app, plain_text
from helpers.jobs import launch, wait_until_ended
from helpers.usage import scenario_file, sleeper

from gputop.core.remote.host_jobs import host_jobs
from gputop.tui.lab.lab_jobs import COLUMNS as LAB_COLUMNS
from gputop.tui.lab.lab_jobs import job_cells as lab_job_cells
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.widgets.jobs_panel import COLUMNS, JobsPanel

BIG = (160, 48)


async def test_the_jobs_panel_and_the_log_view_show_what_a_job_used(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_pid_namespace: None
) -> None:
    scenario = scenario_file(tmp_path, {"used_memory_mib": 1536, "sm_util": 60})
    monkeypatch.setenv("GPUTOP_FAKE", str(scenario))
    monkeypatch.setenv("GPUTOP_USAGE_POLL_S", "0.1")
    ended = wait_until_ended(state_dir, launch(state_dir, sleeper(1.5), gpus=(1,)).id)
    assert ended.usage is not None and ended.usage.peak_memory_bytes == 1536 * 1024 * 1024
    app = make_app(str(scenario))
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)
        deadline = time.monotonic() + 20
        while panel.current_job is None:
            assert time.monotonic() < deadline, "the jobs panel never listed the job"
            await pilot.pause(0.1)
        cells = (str(cell) for cell in panel.get_row_at(panel.cursor_row))
        row = dict(zip(COLUMNS, cells, strict=True))
        assert row["PEAK"] == "1.5G"
        assert row["GPU TIME"].endswith("s") and row["GPU TIME"] != "0s"
        await pilot.press("enter")
        assert isinstance(app.screen, JobLogScreen)
        title = plain_text(app.screen.query_one("#log-title"), width=200)
        assert re.search(r"GPU use: GPU 1: [1-9]\d?s GPU time", title), title
        assert "peak 1.5G (driver accounting), SM 60 %" in title
        assert re.search(r"in all [1-9]\d?s GPU time", title)
        assert title.rstrip().endswith("peak 1.5G")


USAGE_RECORD = {
    "per_card": [
        {"gpu": 0, "uuid": "GPU-x", "peak_memory_bytes": 1536 * 1024**2, "mean_sm_percent": 60,
         "gpu_seconds": 42.0, "energy_j": 300.0, "peak_from": "samples"},
    ],
    "gpu_seconds": 42.0,
    "peak_memory_bytes": 1536 * 1024**2,
    "energy_j": 300.0,
    "samples": 9,
}  # fmt: skip


@pytest.mark.parametrize(
    ("usage", "cells"),
    [
        (USAGE_RECORD, ["42s", "1.5G", "-"]),
        (None, ["-", "-", "-"]),
        ({**USAGE_RECORD, "peak_memory_bytes": -1}, ["-", "-", "-"]),
        ({**USAGE_RECORD, "per_card": [{"gpu_seconds": float("nan")}]}, ["-", "-", "-"]),
        ("[/]\x1b[31m", ["-", "-", "-"]),
    ],
)
def test_the_lab_shows_what_a_hosts_job_used_once_checked(usage: object, cells: list[str]) -> None:
    (job,) = host_jobs(0, "node1", [{"id": 3, "status": "exited", "usage": usage}])
    row = dict(zip(LAB_COLUMNS, (str(cell) for cell in lab_job_cells(job, 0.0)), strict=True))
    assert [row["GPU TIME"], row["PEAK"], row["SM ACT"]] == cells
