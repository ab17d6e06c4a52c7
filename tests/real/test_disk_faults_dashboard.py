"""The dashboard on a read-only file system (docs/faults.md): its jobs panel shows the jobs,
and says once that nothing can be written. A real read-only bind mount
(small_filesystems.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers.dashboard import first_sample, make_app
from helpers.jobs import launch, probe_command, supervisors_of, wait_until_ended
from helpers.waiting import wait_for
from textual.pilot import Pilot

from gputop.tui.widgets.jobs_panel import JobsPanel

BIG = (160, 48)


async def until(pilot: Pilot[None], condition, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout_s} s: {condition.__doc__}")
        await pilot.pause(0.05)


async def test_the_jobs_panel_reads_a_read_only_store_and_says_so_once(
    read_only_view: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, view = read_only_view
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    done = launch(source / "state", probe_command(tmp_path / "p.json"))
    wait_until_ended(source / "state", done.id)
    wait_for(lambda: not supervisors_of(source / "state"), "the supervisor to exit")
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(view / "state"))
    said: list[str] = []
    app = make_app("v100x4")
    shown = app.notify

    def notify(message: str, **options: object) -> None:
        said.append(message)
        shown(message, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(app, "notify", notify)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("J")
        panel = app.query_one(JobsPanel)

        def listed() -> bool:
            """the jobs panel shows the ended job"""
            job = panel.current_job
            return job is not None and job.id == done.id and job.status_text == "exited 0"

        await until(pilot, listed)
        sampled = app.snapshot
        await until(pilot, lambda: app.snapshot is not sampled)  # one more refresh
    faults = [text for text in said if "read-only file system" in text]
    assert len(faults) == 1, said
    assert not [text for text in said if "Jobs unavailable" in text], said
