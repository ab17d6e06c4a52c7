"""The launch dialog's preview for multi-card launchers and for plain python on several cards."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from helpers.dashboard import first_sample, make_app, plain_text
from textual.pilot import Pilot
from textual.widgets import Input, Static

from gputop.tui.app import GputopApp
from gputop.tui.screens.launch import LaunchScreen

BIG = (160, 48)


def preview_text(app: GputopApp) -> str:
    return plain_text(app.screen.query_one("#preview", Static), width=200)


async def dialog_on_gpus_1_and_3(app: GputopApp, pilot: Pilot[None], command: str) -> str:
    await first_sample(pilot)
    await pilot.press("right", "space", "right", "right", "space", "l")
    await pilot.pause()
    assert isinstance(app.screen, LaunchScreen)
    app.screen.query_one("#command", Input).value = command
    await pilot.pause()
    return preview_text(app)


async def test_torchrun_preview_sets_the_process_count_and_lists_each_rank_card() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        preview = await dialog_on_gpus_1_and_3(app, pilot, "torchrun train.py")
        assert "Runs: torchrun --nproc_per_node=2 --master_port=PORT train.py" in preview
        assert "torchrun starts 2 processes:" in preview
        assert "local rank 0 → cuda:0 → GPU 1  Tesla V100-SXM2-16GB  GPU-96870f72" in preview
        assert "local rank 1 → cuda:1 → GPU 3" in preview
        assert "gputop sets it to 2" in preview and "chosen at launch" in preview


async def test_a_process_count_unlike_the_cards_is_warned_in_the_preview() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        preview = await dialog_on_gpus_1_and_3(app, pilot, "torchrun --nproc-per-node=1 t.py")
        assert "⚠ --nproc_per_node=1 but 2 cards are selected: 1 card(s) stay idle." in preview


async def test_plain_python_on_two_cards_is_told_it_uses_one() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        preview = await dialog_on_gpus_1_and_3(app, pilot, "python train.py")
        assert "The script sees 2 devices" in preview
        assert "unless it uses DataParallel or DDP" in preview


async def test_a_job_that_ends_while_the_dashboard_is_open_gets_a_toast(tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        await pilot.press("l")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        screen.query_one("#cwd", Input).value = str(tmp_path)
        # Long enough for the dashboard to read it running on a busy machine: a job first
        # seen ended is no news (gputop/core/jobs/notify.py), so it would get no toast.
        command = f"{sys.executable} -c 'import time, sys; time.sleep(3); sys.exit(4)'"
        screen.query_one("#command", Input).value = command
        screen.query_one("#command", Input).focus()
        await pilot.press("enter")

        def toasts() -> list[str]:
            return [str(n.message) for n in app._notifications]

        deadline = time.monotonic() + 30
        while not any("failed 4 after" in toast for toast in toasts()):
            assert time.monotonic() < deadline, f"no toast for the job's end: {toasts()}"
            await pilot.pause(0.1)
        (ended,) = [toast for toast in toasts() if "failed 4" in toast]
        assert ended.startswith("Job 1 (python -c) failed 4 after")
