"""The launch dialog submits through sbatch where Slurm is here (docs/slurm.md), against
the real one-node cluster: Slurm chooses the cards, the preview says so, and what Slurm
refuses is shown in its own words with nothing recorded."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from helpers.dashboard import first_sample, plain_text
from helpers.slurm_cluster import SlurmCluster
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Static

from gputop.core.jobs.store import JobStore
from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.screenshots import build_app

BIG = (160, 48)
DEADLINE_S = 30.0


async def until(pilot: Pilot[None], what: str, check: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {DEADLINE_S} s: {what}")
        await pilot.pause(0.1)


async def open_slurm_dialog(app: GputopApp, pilot: Pilot[None], tmp_path: Path) -> LaunchScreen:
    await first_sample(pilot)
    await pilot.press("space", "right", "space", "l")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, LaunchScreen)
    screen.query_one("#slurm", Checkbox).value = True
    screen.query_one("#cwd", Input).value = str(tmp_path)
    return screen


def stored_jobs(state_dir: Path) -> list[Any]:
    if not (state_dir / "jobs.sqlite3").exists():
        return []
    with JobStore.open(state_dir) as store:
        return store.list_jobs()


async def test_the_dialog_submits_two_cards_worth_through_sbatch_and_says_slurm_chooses(
    slurm: SlurmCluster, tmp_path: Path, private_state_dir: Path
) -> None:
    app = build_app("v100x4", environ=dict(os.environ), user="root")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_slurm_dialog(app, pilot, tmp_path)
        screen.query_one("#command", Input).value = "sleep 600"
        await pilot.pause()
        preview = plain_text(screen.query_one("#preview", Static), 200)
        assert "Submits through sbatch: 2 GPUs" in preview
        assert "Slurm chooses the physical cards" in preview
        screen.query_one("#command", Input).focus()
        await pilot.press("enter")
        await until(pilot, "the dialog closed", lambda: not isinstance(app.screen, LaunchScreen))

    (job,) = stored_jobs(private_state_dir)
    assert job.slurm_job_id is not None and job.command == ("sleep", "600")
    shown = slurm.command("scontrol", "show", "job", str(job.slurm_job_id)).stdout
    assert "TresPerJob=gres:gpu:2" in shown or "TresPerJob=gres/gpu:2" in shown


async def test_a_partition_slurm_does_not_know_is_refused_in_slurms_words(
    slurm: SlurmCluster, tmp_path: Path, private_state_dir: Path
) -> None:
    app = build_app("v100x4", environ=dict(os.environ), user="root")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_slurm_dialog(app, pilot, tmp_path)
        await pilot.pause()
        screen.query_one("#slurm-partition", Input).value = "nosuch"
        screen.query_one("#command", Input).value = "sleep 600"
        screen.query_one("#command", Input).focus()
        await pilot.press("enter")
        error = screen.query_one("#launch-error", Static)
        await until(pilot, "an error shown", lambda: bool(error.display))
        assert "invalid partition specified: nosuch" in plain_text(error, 200)
        assert isinstance(app.screen, LaunchScreen)

    assert stored_jobs(private_state_dir) == []


async def test_without_slurm_the_dialog_offers_no_slurm_option(tmp_path: Path) -> None:
    app = build_app("v100x4", environ={}, user="root", job_environ={"PATH": str(tmp_path)})
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        assert not app.screen.query("#slurm")
