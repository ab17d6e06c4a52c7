"""The dashboard across hosts end to end, through a real sshd on 127.0.0.1 (tests/helpers/sshd.py).

Each alias reaches the test server as a different machine running ``gputop agent`` on its
own simulated scenario and job store; the dashboard is driven with Pilot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.sshd import SshServer, start_server
from textual.pilot import Pilot
from textual.widgets import Input

from gputop.core.jobs.store import JobStore
from gputop.core.remote.hosts import resolve_hosts
from gputop.core.remote.lab import Lab
from gputop.core.remote.transport import SSH_CONFIG_ENV
from gputop.core.sampling.source import open_backend
from gputop.tui.lab.lab_app import LabApp
from gputop.tui.lab.lab_grid import LabGrid

WAIT_S = 40.0
HOSTS = "gpu-v100,gpu-dgx,gpu-reduced,local,no-such-host.invalid"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    started = start_server(tmp_path)
    monkeypatch.setenv(SSH_CONFIG_ENV, str(started.ssh_config))
    yield started
    started.kill()


@pytest.fixture
def lab(server: SshServer) -> Iterator[Lab]:
    entries = resolve_hosts(HOSTS, {})
    opened = Lab(
        entries,
        0.5,
        lambda: open_backend("demo", environ={"GPUTOP_FAKE_TIME": "30"}),
        first_retry_s=0.2,
        max_retry_s=1.0,
    )
    with opened:
        yield opened


def lab_app(lab: Lab) -> LabApp:
    return LabApp(lab, [link.host for link in lab.links], interval_s=0.5, user="alice")


def lines(app: LabApp) -> list[str]:
    return [group.line.plain for group in app.query_one(LabGrid).groups]


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S} s: {what}")
        await pilot.pause(0.1)


async def enter_command(pilot: Pilot[None], command: str) -> None:
    """The launch dialog's command, set whole and launched with enter. Typed one key at a
    time it took a repaint of the dashboard per character: up to 40 s on a loaded machine."""
    field = pilot.app.screen.query_one("#command", Input)
    field.value = command
    field.focus()
    await pilot.press("enter")


def settled_lines(app: LabApp) -> bool:
    shown = lines(app)
    return len(shown) == 5 and all("connecting" not in line and line for line in shown)


async def test_the_dashboard_shows_every_host_and_says_why_a_wrong_name_fails(lab: Lab) -> None:
    app = lab_app(lab)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: settled_lines(app), "every host answered")
        shown = lines(app)
        notes = [str(n.message) for n in app._notifications]
        gpus = [len(group.physical) for group in app.query_one(LabGrid).groups]
    assert "gpu-v100  live  " in shown[0]
    assert "gpu-dgx  live  " in shown[1]
    assert "gpu-reduced  live, reduced mode" in shown[2]
    assert "local  live" in shown[3]
    assert "no-such-host.invalid  unreachable: unknown host name" in shown[4]
    assert gpus == [4, 8, 2, 6, 0]  # v100x4, dgx-h100, the stand-in nvidia-smi, demo
    assert any(
        "no-such-host.invalid: unreachable: unknown host name" in note and "check the name" in note
        for note in notes
    )


async def test_a_job_launched_from_the_dashboard_on_a_remote_gpu_1_sees_exactly_that_card(
    lab: Lab, server: SshServer, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    app = lab_app(lab)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: settled_lines(app), "every host answered")
        snapshot = app.statuses[0].snapshot
        assert snapshot is not None
        gpu1_uuid = snapshot.gpus[1].uuid
        await pilot.press("right", "l")
        await until(pilot, lambda: app.screen.id != "_default", "the launch dialog")
        await enter_command(pilot, f"sh -c 'echo \"$CUDA_VISIBLE_DEVICES\" > {seen}'")
        await until(
            pilot,
            lambda: any(j.host == 0 for j in app.remote_jobs),
            "the job in gpu-v100's jobs panel",
        )
        job = next(j for j in app.remote_jobs if j.host == 0)
        # The job runs detached on the server: wait for what it wrote.
        await until(pilot, lambda: seen.exists() and seen.read_text().strip() != "", "its file")
    with JobStore.open(server.state_dir("gpu-v100")) as store:
        recorded = store.get(job.id)
    assert recorded.physical_indices == (1,)
    assert recorded.env["CUDA_VISIBLE_DEVICES"] == gpu1_uuid
    assert recorded.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert seen.read_text().strip() == gpu1_uuid


async def test_killing_sshd_shows_hosts_unreachable_then_they_reconnect(
    lab: Lab, server: SshServer
) -> None:
    app = lab_app(lab)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: settled_lines(app), "every host answered")
        server.kill()
        await until(
            pilot,
            lambda: "unreachable: connection refused" in lines(app)[0],
            "gpu-v100 unreachable",
        )
        cards_kept = len(app.query_one(LabGrid).groups[0].physical)
        local = lines(app)[3]
        server.start()
        await until(pilot, lambda: "gpu-v100  live" in lines(app)[0], "gpu-v100 live again")
    assert cards_kept == 4
    assert "local  live" in local


async def test_a_remote_jobs_log_is_followed_and_k_stops_it_on_its_host(
    lab: Lab, server: SshServer
) -> None:
    from textual.widgets import RichLog

    from gputop.tui.lab.remote_screens import RemoteLogScreen
    from gputop.tui.screens.confirm import ConfirmScreen

    app = lab_app(lab)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: settled_lines(app), "every host answered")
        await pilot.press("g", "l")  # gpu-dgx, its first card
        await until(pilot, lambda: app.screen.id != "_default", "the launch dialog")
        await enter_command(pilot, "sh -c 'echo hello-from-dgx; sleep 60'")
        await until(
            pilot,
            lambda: any(j.host == 1 and j.status == "running" for j in app.remote_jobs),
            "the job running on gpu-dgx",
        )
        job = next(j for j in app.remote_jobs if j.host == 1)
        await pilot.press("escape")  # back to the dashboard if a notice holds the focus
        app.action_toggle_jobs()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RemoteLogScreen), "the log view")
        title = str(app.screen.query_one("#log-title").render())
        assert "\nGPU use: " in title  # what it used, as its host's gputop jobs --json says
        log = app.screen.query_one(RichLog)
        await until(
            pilot,
            lambda: any("hello-from-dgx" in line.text for line in log.lines),
            "the job's line in the log view",
        )
        await pilot.press("escape")
        # K is the jobs table's: pressed while the log view was still closing it was lost,
        # and the log view passed for the confirmation (then the job ran on for 60 s)
        await until(pilot, lambda: app.screen.id == "_default", "the log view closed")
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(
                j.id == job.id and j.host == 1 and j.status == "killed" for j in app.remote_jobs
            ),
            "the job killed on gpu-dgx",
        )
    with JobStore.open(server.state_dir("gpu-dgx")) as store:
        assert store.get(job.id).stop_requested


def test_gputop_hosts_opens_the_dashboard_across_hosts_on_a_terminal(
    server: SshServer, tmp_path: Path
) -> None:
    import os

    from helpers.pty_run import GPUTOP, run_in_pty

    env = {k: v for k, v in os.environ.items() if k not in ("GPUTOP_DEBUG", "TMUX")}
    env.update(
        GPUTOP_FAKE="demo",
        GPUTOP_FAKE_TIME="30",
        GPUTOP_STATE_DIR=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        TERM="xterm-256color",
    )
    env[SSH_CONFIG_ENV] = str(server.ssh_config)

    def every_host_shown(run: object) -> bool:
        screen = run.display  # type: ignore[attr-defined]
        return (
            "gpu-v100  live" in screen
            and "local  live" in screen
            and "no-such-host.invalid  unreachable: unknown host name" in screen
        )

    run = run_in_pty(
        [*GPUTOP, "--hosts", "gpu-v100,local,no-such-host.invalid"],
        env,
        until=every_host_shown,
        then_type=b"q",
        what="every host's summary line",
    )

    assert run.exit_code == 0, run.display
