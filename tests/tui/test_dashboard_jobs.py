"""Launching and following jobs from the dashboard, by key presses, with real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.dashboard import (
    first_sample,
    launch,
    make_app,
    open_launch_dialog,
    plain_text,
    preview_text,
    stays_true,
)
from helpers.waiting import pilot_wait_for
from textual.widgets import Input, RichLog, Static

from gputop.core.jobs.model import Job, JobState, RunMode
from gputop.core.jobs.service import JobsView, job_processes
from gputop.core.jobs.store import JobStore
from gputop.core.model import GpuProcess, GpuSample, ProcessOrigin, ProcessType, Snapshot
from gputop.core.sampling.source import environment_for_jobs
from gputop.tui.screens.confirm import ConfirmScreen
from gputop.tui.screens.job_log import JobLogScreen
from gputop.tui.screens.launch import LaunchScreen
from gputop.tui.widgets.jobs_panel import JobsPanel
from gputop.tui.widgets.process_table import ProcessTable

BIG = (160, 48)
V100_UUIDS = {
    1: "GPU-96870f72-ff47-4de2-1bb0-99f7d8338c12",
}

PROBE = textwrap.dedent(
    """
    import json, os, sys, time
    with open(sys.argv[1], "w") as out:
        json.dump({k: v for k, v in os.environ.items() if k.startswith("CUDA_")}, out)
    print("probe says hello", flush=True)
    time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
    """
)


def stored_jobs() -> list[Job]:
    store = JobStore.open()
    try:
        return store.list_jobs()
    finally:
        store.close()


@pytest.fixture(autouse=True)
def no_job_left_behind() -> Iterator[None]:
    """Whatever a test launched is ended with it, supervisor and process group alike."""
    yield
    for job in stored_jobs():
        for pid in (job.pid, job.supervisor_pid):
            if pid and job.is_active:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    return script


# -- the launch dialog ---------------------------------------------------------------------


async def test_l_opens_the_launch_dialog_for_the_selected_cards() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot, "right", "right", "space", "left", "space")
        assert screen.context.physical_indices == (1, 2)
        assert "Launch on GPU 1, GPU 2" in plain_text(screen.query_one("#launch-title", Static))


async def test_the_launch_preview_shows_the_environment_and_cuda_order() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "space", "right", "right", "space")
        preview = preview_text(app)
        assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in preview
        assert "CUDA_VISIBLE_DEVICES=GPU-" in preview
        assert "cuda:0 → GPU 1" in preview and "cuda:1 → GPU 3" in preview


async def test_a_card_with_another_users_processes_is_warned_about() -> None:
    app = make_app("v100x4")  # GPU 0 runs two of ubuntu's processes; the user here is alice
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot)
        assert "⚠" in preview_text(app) and "ubuntu" in preview_text(app)


async def test_a_free_card_gets_no_warning() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "right")  # GPU 2: 11 MiB used, idle
        assert "⚠" not in preview_text(app)


async def test_a_command_that_needs_a_shell_says_so() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        screen.query_one("#command", Input).value = "python train.py | tee train.log"
        await pilot.pause()
        assert "Runs under a shell" in preview_text(app)
        screen.query_one("#command", Input).value = "python train.py --lr 3e-4"
        await pilot.pause()
        assert "Runs: python train.py --lr 3e-4" in preview_text(app)


async def test_escape_cancels_and_launches_nothing() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        screen.query_one("#command", Input).value = "python train.py"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, LaunchScreen)
    assert stored_jobs() == []


async def test_a_missing_working_directory_is_refused_in_the_dialog(tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "right")
        await launch(app, pilot, "python train.py", tmp_path / "no-such-dir")
        await pilot_wait_for(
            pilot,
            lambda: "no-such-dir" in plain_text(app.screen.query_one("#launch-error", Static)),
        )
        assert isinstance(app.screen, LaunchScreen)  # still open, to fix and retry
    assert stored_jobs() == []


async def test_enter_launches_with_the_focus_on_the_run_mode_or_a_checkbox(
    probe: Path, tmp_path: Path
) -> None:
    """The hint says "enter launches": a RadioSet or Checkbox toggles on space alone."""
    from textual.widgets import Checkbox, RadioSet

    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot, "right", "right")
        wait = screen.query_one("#wait", Checkbox)
        wait.focus()
        await pilot.press("enter")  # no command yet: the launch says so
        await pilot_wait_for(
            pilot,
            lambda: "Type the command" in plain_text(screen.query_one("#launch-error", Static)),
        )
        assert wait.value is False
        await pilot.press("space")
        assert wait.value is True
        await pilot.press("space")
        assert wait.value is False

        screen.query_one("#cwd", Input).value = str(tmp_path)
        screen.query_one("#command", Input).value = f"{sys.executable} {probe} {tmp_path / 'o'}"
        mode = screen.query_one("#mode", RadioSet)
        mode.focus()
        await pilot.press("enter")
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
    assert [job.mode for job in stored_jobs()] == [RunMode.DETACHED]  # launched, not toggled


async def test_up_recalls_earlier_commands() -> None:
    store = JobStore.open()
    store.add_history("python old.py")
    store.add_history("python newer.py")
    store.close()
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        screen = await open_launch_dialog(app, pilot)
        await pilot_wait_for(pilot, lambda: len(screen.history) == 2)  # read in a worker
        await pilot.press("up")
        assert screen.query_one("#command", Input).value == "python newer.py"
        await pilot.press("up")
        assert screen.query_one("#command", Input).value == "python old.py"
        await pilot.press("down", "down")
        assert screen.query_one("#command", Input).value == ""


# -- from key presses to a finished job ------------------------------------------------------


async def test_keys_to_a_finished_job_in_the_jobs_panel(probe: Path, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right")  # GPU 1
        await launch(app, pilot, f"{sys.executable} {probe} {out}", tmp_path)
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        panel = app.query_one(JobsPanel)
        assert panel.display and app.focused is app.query_one("#cards")  # shown; focus kept

        def finished() -> bool:
            """the jobs panel shows the job as exited 0"""
            job = panel.current_job
            return job is not None and job.status_text == "exited 0"

        await pilot_wait_for(pilot, finished)
        assert "probe says hello" in plain_text_of_row(panel)
    assert json.loads(out.read_text()) == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": V100_UUIDS[1],
    }
    (job,) = stored_jobs()
    assert job.physical_indices == (1,) and job.exit_code == 0


def plain_text_of_row(panel: JobsPanel) -> str:
    return " ".join(str(cell) for cell in panel.get_row_at(panel.cursor_row))


async def test_J_toggles_the_jobs_panel() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        assert not app.query_one("#jobs-box").display
        assert not app.query(JobsPanel)  # without a job, its table comes with the first J
        await pilot.press("J")
        assert app.query_one(JobsPanel).display and app.focused is app.query_one(JobsPanel)
        await pilot.press("J")
        assert not app.query_one(JobsPanel).display


async def test_J_in_a_small_terminal_brings_the_jobs_back_over_the_pytorch_view() -> None:
    app = make_app("v100x4")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_sample(pilot)
        await pilot.press("p")
        assert app.query_one("#torch").display and not app.query_one("#left").display
        await pilot.press("J")
        await pilot.pause()
        assert app.query_one(JobsPanel).region.height > 0
        assert not app.query_one("#torch").display


async def test_enter_on_a_job_follows_its_log(probe: Path, tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "right")
        await launch(app, pilot, f"{sys.executable} {probe} {tmp_path / 'o.json'} 30", tmp_path)
        await pilot_wait_for(pilot, lambda: app.query_one(JobsPanel).current_job is not None)
        await pilot.press("tab", "tab")  # the focus stays on the cards after a launch
        assert app.focused is app.query_one(JobsPanel)
        await pilot.press("enter")
        assert isinstance(app.screen, JobLogScreen)
        log = app.screen.query_one(RichLog)

        def logged() -> bool:
            """the log screen shows what the job printed"""
            return any("probe says hello" in line.text for line in log.lines)

        await pilot_wait_for(pilot, logged)
        await pilot.press("escape")
        assert not isinstance(app.screen, JobLogScreen)


async def test_K_then_y_stops_a_running_job(probe: Path, tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "right")
        await launch(app, pilot, f"{sys.executable} {probe} {tmp_path / 'o.json'} 60", tmp_path)
        panel = app.query_one(JobsPanel)

        def running() -> bool:
            """the job is running"""
            return panel.current_job is not None and panel.current_job.status == "running"

        await pilot_wait_for(pilot, running)
        panel.focus()
        await pilot.press("K")
        assert isinstance(app.screen, ConfirmScreen)
        assert "SIGTERM" in app.screen._question and "Stop job" in app.screen._question
        await pilot.press("y")

        def killed() -> bool:
            """the job shows as killed"""
            return panel.current_job is not None and panel.current_job.status == "killed"

        await pilot_wait_for(pilot, killed)


async def test_K_then_n_keeps_the_job(probe: Path, tmp_path: Path) -> None:
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right", "right")
        await launch(app, pilot, f"{sys.executable} {probe} {tmp_path / 'o.json'} 60", tmp_path)
        panel = app.query_one(JobsPanel)
        await pilot_wait_for(pilot, lambda: panel.current_job is not None)
        panel.focus()
        await pilot.press("K", "n")

        def untouched() -> bool:
            (job,) = stored_jobs()
            return job.is_active and not job.stop_requested

        assert await stays_true(pilot, untouched, 0.5)


# -- job processes in the process table -----------------------------------------------------


def running_job(pid: int, job_id: int = 7) -> Job:
    return Job(
        id=job_id,
        name="train.py",
        command=("python", "train.py"),
        command_text="python train.py",
        uses_shell=False,
        cwd="/",
        physical_indices=(0,),
        uuids=("GPU-x",),
        env={},
        mode=RunMode.DETACHED,
        state=JobState.RUNNING,
        log_path="/nonexistent.log",
        created_at=0.0,
        pid=pid,
    )


def snapshot_with_pids(*pids: int) -> Snapshot:
    processes = tuple(
        GpuProcess(pid, 0, ProcessType.COMPUTE, 1 << 30, origin=ProcessOrigin.HOST) for pid in pids
    )
    gpu = GpuSample(0, "GPU-x", "Test GPU", "00000000:01:00.0", processes=processes)
    return Snapshot("host", None, None, None, 0.0, (gpu,))


def test_a_jobs_child_processes_are_recognised_by_their_session() -> None:
    """A job leads its own session: a DataLoader worker it forks is still its process."""
    leader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert leader.stdout is not None
        child_pid = int(leader.stdout.readline())
        snapshot = snapshot_with_pids(leader.pid, child_pid, stranger.pid)
        found = job_processes(snapshot, [running_job(leader.pid)])
        assert found == {leader.pid: 7, child_pid: 7}
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        stranger.kill()
        leader.wait()
        stranger.wait()


async def test_processes_of_a_job_are_marked_in_the_process_table() -> None:
    # One sample in the test's time: a later one would show its own jobs (none) over these.
    app = make_app("v100x4", interval_s=3600.0)
    async with app.run_test(size=BIG) as pilot:
        await first_sample(pilot)
        table = app.query_one(ProcessTable)
        await pilot_wait_for(pilot, lambda: table.current_process is not None)
        assert table.current_process is not None
        first_pid = table.current_process.pid
        app._show_jobs(JobsView(job_of_pid={first_pid: 12}, read_number=10**9))
        await pilot.pause()
        assert table.rows[0].text(-1).startswith("[job 12] ")


def test_jobs_of_a_simulated_dashboard_see_the_same_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job waiting for free cards reads the GPUs again: the simulated ones, not a driver."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "box.json").write_text("{}")
    assert environment_for_jobs("v100x4", {})["GPUTOP_FAKE"] == "v100x4"
    assert environment_for_jobs("box.json", {})["GPUTOP_FAKE"] == str(tmp_path / "box.json")
    assert "GPUTOP_FAKE" not in environment_for_jobs(None, {"PATH": "/bin"})


async def test_after_a_launch_the_jobs_panel_highlights_the_new_job(
    probe: Path, tmp_path: Path
) -> None:
    """Job 1 highlighted, job 2 launched: enter and K act on job 2, not job 1 (issue 28)."""
    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        panel = app.jobs_table()
        await open_launch_dialog(app, pilot, "right", "right")
        await launch(app, pilot, f"{sys.executable} {probe} {tmp_path / 'a.json'} 60", tmp_path)
        await pilot_wait_for(
            pilot, lambda: panel.current_job is not None and panel.current_job.id == 1
        )
        app.query_one("#cards").focus()
        await pilot.press("right", "l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        await launch(app, pilot, f"{sys.executable} {probe} {tmp_path / 'b.json'} 60", tmp_path)

        def two_shown() -> bool:
            """both jobs are in the panel"""
            return panel.row_count == 2

        await pilot_wait_for(pilot, two_shown)
        assert panel.current_job is not None and panel.current_job.id == 2
        assert app.focused is app.query_one("#cards")  # the focus stays where it was
        panel.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, JobLogScreen)
        assert app.screen.job.id == 2
        await pilot.press("escape")
        await pilot.press("K")
        assert isinstance(app.screen, ConfirmScreen)
        assert "Stop job 2 " in app.screen._question
        await pilot.press("n")


async def test_a_launch_gives_one_toast_not_launched_then_started(tmp_path: Path) -> None:
    """The launch's own toast (with the log) says it; the start that follows at once is no
    news of its own (a job queued for busy cards still gets word when it starts)."""
    from dataclasses import replace

    from gputop.tui.jobs_actions import JobsRead

    app = make_app("v100x4")
    async with app.run_test(size=BIG) as pilot:
        await open_launch_dialog(app, pilot, "right")  # GPU 1
        await launch(app, pilot, f"{sys.executable} -c 'import time; time.sleep(60)'", tmp_path)
        await pilot_wait_for(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        (job,) = stored_jobs()
        # The reads a dashboard can make: the job not started yet, then running.
        newest = 10**9
        waiting = replace(job, state=JobState.WAITING, pid=None, started_at=None)
        app.post_message(JobsRead(JobsView(jobs=(waiting,), read_number=newest)))
        await pilot_wait_for(pilot, lambda: app.jobs_service.view.read_number >= newest)
        running = replace(job, state=JobState.RUNNING)
        app.post_message(JobsRead(JobsView(jobs=(running,), read_number=newest + 1)))
        await pilot_wait_for(pilot, lambda: app.jobs_service.view.read_number > newest)
        await pilot.pause()
        said = [n.message for n in app._notifications if f"Job {job.id} (" in n.message]
        assert said == [f"Job {job.id} ({job.name}) launched on GPU 1. Log: {job.log_path}"]
        queued = replace(waiting, id=job.id + 1, wait_for_free=True)
        app._launched_here = app._launched_here | {queued.id}
        app.post_message(JobsRead(JobsView(jobs=(running, queued), read_number=newest + 2)))
        await pilot_wait_for(pilot, lambda: app.jobs_service.view.read_number > newest + 1)
        started = replace(queued, state=JobState.RUNNING)
        app.post_message(JobsRead(JobsView(jobs=(running, started), read_number=newest + 3)))
        await pilot_wait_for(
            pilot,
            lambda: any(f"Job {queued.id} (" in n.message for n in app._notifications),
            "word that the queued job started",
        )
