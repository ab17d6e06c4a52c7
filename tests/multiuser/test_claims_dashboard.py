"""The dashboard's launch and another user's claim (docs/claims.md, "Jobs"): refused as
``gputop run`` refuses it, with nothing recorded; a launch that waits waits for the claim.
A real second user's claim, simulated cards, the dashboard under Pilot."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from helpers.claims import User, gputop_as
from helpers.dashboard import launch, make_app, open_launch_dialog
from helpers.jobs import wait_until_waiting
from helpers.waiting import pilot_wait_for
from textual.widgets import Checkbox, Static

from gputop.cli.main import main
from gputop.core.jobs.model import Job
from gputop.core.jobs.store import JobStore
from gputop.core.sampling.source import environment_for_jobs
from gputop.tui.screens.launch import LaunchScreen


def stored_jobs() -> list[Job]:
    store = JobStore.open()
    try:
        return store.list_jobs()
    finally:
        store.close()


def end_jobs() -> None:
    for job in stored_jobs():
        for pid in (job.pid, job.supervisor_pid):
            if pid and job.is_active:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)


def launch_error(screen: LaunchScreen) -> str:
    if not screen.is_attached:
        return "(the dialog closed: launched)"
    shown = screen.query_one("#launch-error", Static)
    return str(shown.content) if shown.display else ""


async def test_the_dashboard_refuses_another_users_claimed_card_as_run_does(
    state_dir: Path, claims_dir: Path, tmp_path: Path, two_users: tuple[User, User], capsys
) -> None:
    ana, _ = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    assert main(["--fake", "v100x4", "run", "--gpus", "1", "--", "true"]) == 1
    said_by_run = capsys.readouterr().err
    assert f"Nothing was launched: GPU 1 is claimed by {ana.name} until" in said_by_run
    app = make_app("v100x4")
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            screen = await open_launch_dialog(app, pilot, "right")  # GPU 1
            await launch(app, pilot, f"{sys.executable} -c pass", tmp_path)
            await pilot_wait_for(pilot, lambda: launch_error(screen), "the dialog's refusal")
            assert app.screen is screen  # the dialog stays open, for other cards or a wait
            said = " ".join(launch_error(screen).split())
            assert f"✗ Nothing was launched: GPU 1 is claimed by {ana.name} until" in said
            assert "Wait until these cards are free" in said
            # the same words as gputop run's, up to its advice
            assert said_by_run.split("until", 1)[0].split("Nothing", 1)[1] in said
        assert stored_jobs() == []  # nothing recorded: no failed job left behind
    finally:
        end_jobs()


async def test_a_dashboard_launch_that_waits_waits_for_the_claim(
    state_dir: Path, claims_dir: Path, tmp_path: Path, two_users: tuple[User, User]
) -> None:
    ana, _ = two_users
    assert gputop_as(ana, claims_dir, "claim", "--gpus", "1").returncode == 0
    app = make_app("v100x4", job_environ=environment_for_jobs("v100x4"))
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            screen = await open_launch_dialog(app, pilot, "right")
            screen.query_one("#wait", Checkbox).value = True
            await launch(app, pilot, f"{sys.executable} -c pass", tmp_path)
            await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        (job,) = stored_jobs()
        waiting = wait_until_waiting(state_dir, job.id)
        assert f"GPU 1: claimed by {ana.name} until" in (waiting.note or "")
    finally:
        end_jobs()


async def test_the_dashboard_refuses_a_launch_where_claims_cannot_be_told_as_run_does(
    state_dir: Path, claims_dir: Path, tmp_path: Path, two_users: tuple[User, User], capsys
) -> None:
    """bob floods the claims directory: which cards others claimed cannot be told, and a
    flood voids nobody's claim. gputop run refuses; so does the dashboard, saying the same."""
    from helpers.claims import as_user, python_for_users

    _, bob = two_users
    flood = (
        "import os, sys\n"
        "for i in range(10_001):\n"
        "    os.close(os.open(os.path.join(sys.argv[1], f'x{i}'), os.O_CREAT | os.O_WRONLY))\n"
    )
    python, path = python_for_users()
    made = as_user(bob, [python, "-c", flood, str(claims_dir)], {"PYTHONPATH": path})
    assert made.returncode == 0, made.stderr
    assert main(["--fake", "v100x4", "run", "--gpus", "1", "--", "true"]) == 1
    said_by_run = " ".join(capsys.readouterr().err.split())
    assert "Nothing was launched:" in said_by_run and "cannot be told" in said_by_run
    app = make_app("v100x4")
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            screen = await open_launch_dialog(app, pilot, "right")
            await launch(app, pilot, f"{sys.executable} -c pass", tmp_path)
            await pilot_wait_for(pilot, lambda: launch_error(screen), "the dialog's refusal")
            said = " ".join(launch_error(screen).split())
            assert said.startswith("✗ Nothing was launched:") and "cannot be told" in said
            assert said_by_run.split("Nothing was launched: ", 1)[1].split(" Which")[0] in said
        assert stored_jobs() == []
    finally:
        end_jobs()
